package simulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"
)

// maxConfigBytes bounds a POST /sim/config body.
const maxConfigBytes = 1 << 20

// handleControl serves the /sim/* endpoints that tests use to steer the
// simulator and observe what it received.
func (s *Server) handleControl(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/sim/config":
		switch r.Method {
		case http.MethodGet:
			writeJSON(w, http.StatusOK, s.Config())
		case http.MethodPost:
			s.mergeConfig(w, r)
		default:
			writeMethodNotAllowed(w, "GET, POST")
		}
	case "/sim/stats":
		if r.Method != http.MethodGet {
			writeMethodNotAllowed(w, http.MethodGet)
			return
		}
		writeJSON(w, http.StatusOK, s.Stats())
	case "/sim/requests":
		if r.Method != http.MethodGet {
			writeMethodNotAllowed(w, http.MethodGet)
			return
		}
		writeJSON(w, http.StatusOK, capturedList{Requests: s.captured.list(r.URL.Query().Get("path"))})
	case "/sim/reset":
		if r.Method != http.MethodPost {
			writeMethodNotAllowed(w, http.MethodPost)
			return
		}
		s.Reset()
		writeJSON(w, http.StatusOK, s.Stats())
	default:
		writeNotFound(w)
	}
}

// mergeConfig applies a partial JSON Config: the fields present override
// the ones set so far, and fields set to zero return to their default
// (the dialect's, for those that have one). Unknown fields and invalid
// values are a 400 and change nothing. It answers with the resulting
// Config in force.
func (s *Server) mergeConfig(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxConfigBytes))
	if err != nil {
		badRequest("reading the request body: " + err.Error()).write(w)
		return
	}
	s.mu.Lock()
	set, err := mergeJSON(s.set, body)
	cfg := set.withDefaults()
	if err == nil {
		s.set, s.cfg = set, cfg
		s.engine.configure(cfg)
		var fields map[string]json.RawMessage
		if json.Unmarshal(body, &fields) == nil && fields["loading"] != nil {
			// A new loading period starts now.
			s.readyAt = time.Now().Add(cfg.Loading.D())
		}
	}
	s.mu.Unlock()
	if err != nil {
		badRequest(err.Error()).write(w)
		return
	}
	writeJSON(w, http.StatusOK, cfg)
}

// mergeJSON returns cfg with the fields present in the JSON object patch
// replaced, validated; defaults are left to the caller.
func mergeJSON(cfg Config, patch []byte) (Config, error) {
	if len(bytes.TrimSpace(patch)) == 0 {
		return Config{}, errors.New("empty body: want a JSON object of Config fields")
	}
	dec := json.NewDecoder(bytes.NewReader(patch))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return Config{}, err
	}
	if dec.More() {
		return Config{}, errors.New("trailing data after the JSON object")
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}
