package llmadmin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmedge/llmedge/auth"
)

// maxAdminBodyBytes bounds the body of POST /llmedge/keys.
const maxAdminBodyBytes = 64 << 10

// CreateKeyRequest is the body of POST /llmedge/keys.
type CreateKeyRequest struct {
	User string `json:"user"`
	// Models the key may use, within the user's; none: all of the user's.
	Models []string `json:"models,omitempty"`
	// Expires is the key's lifetime, a duration such as "720h" or "30d";
	// api_key_ttl when empty.
	Expires string `json:"expires,omitempty"`
	Name    string `json:"name,omitempty"`
	// Priority is the key's class of work under overload (critical,
	// standard, sheddable); its user's when empty.
	Priority string `json:"priority,omitempty"`
	// Team puts the key in a configured team; none: its user's team.
	Team string `json:"team,omitempty"`
}

// CreateKeyResponse answers POST /llmedge/keys: the key, shown this once,
// and what was stored about it.
type CreateKeyResponse struct {
	Key string `json:"key"`
	auth.APIKeyInfo
}

// apiKeysCollection serves /llmedge/keys: POST creates, GET lists.
func apiKeysCollection(w http.ResponseWriter, r *http.Request) error {
	switch r.Method {
	case http.MethodPost:
		return createAPIKey(w, r)
	case http.MethodGet:
		return listAPIKeys(w, r)
	}
	w.Header().Set("Allow", "GET, POST")
	return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed: GET lists keys, POST creates one", r.Method)}
}

// apiKeyItem serves DELETE /llmedge/keys/<id or name>.
func apiKeyItem(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodDelete {
		w.Header().Set("Allow", "DELETE")
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed: DELETE revokes a key", r.Method)}
	}
	ref := strings.TrimPrefix(r.URL.Path, "/llmedge/keys/")
	if ref == "" || strings.Contains(ref, "/") {
		return badRequest("want DELETE /llmedge/keys/<id or name>")
	}
	app, err := runningApp()
	if err != nil {
		return err
	}
	info, err := app.Credentials().APIKeys().Revoke(r.Context(), ref)
	if err != nil {
		return keyError(err)
	}
	return writeAdminJSON(w, http.StatusOK, map[string]any{"revoked": info})
}

func createAPIKey(w http.ResponseWriter, r *http.Request) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBodyBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return caddy.APIError{HTTPStatus: http.StatusRequestEntityTooLarge, Err: fmt.Errorf("the body is over %d bytes", maxAdminBodyBytes)}
	}
	if err != nil {
		return badRequest("reading the body: %v", err)
	}
	var req CreateKeyRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields() // a misspelt "modles" must not make a key for every model
	if err := dec.Decode(&req); err != nil {
		return badRequest("the body must be a JSON object {\"user\",\"models\",\"expires\",\"name\",\"priority\",\"team\"}: %v", err)
	}
	if dec.More() {
		return badRequest("unexpected data after the JSON object")
	}
	var ttl time.Duration
	if req.Expires != "" {
		if ttl, err = caddy.ParseDuration(req.Expires); err != nil || ttl <= 0 {
			return badRequest("expires %q: want a positive duration such as 720h or 30d", req.Expires)
		}
	}
	app, err := runningApp()
	if err != nil {
		return err
	}
	if req.Team != "" && !app.TeamConfigured(req.Team) {
		return badRequest("team %q is not configured (want one of: %s)", req.Team, strings.Join(app.TeamNames(), ", "))
	}
	key, info, err := app.Credentials().APIKeys().Create(r.Context(), auth.NewAPIKey{User: req.User, Models: req.Models, Name: req.Name, TTL: ttl,
		Priority: req.Priority, Team: req.Team})
	if err != nil {
		return keyError(err)
	}
	app.Logger().Info("created an API key", zap.String("id", info.ID), zap.String("name", info.Name), zap.String("user", info.User))
	return writeAdminJSON(w, http.StatusCreated, CreateKeyResponse{Key: key, APIKeyInfo: info})
}

func listAPIKeys(w http.ResponseWriter, r *http.Request) error {
	app, err := runningApp()
	if err != nil {
		return err
	}
	infos, err := app.Credentials().APIKeys().List(r.Context())
	if err != nil {
		return keyError(err)
	}
	return writeAdminJSON(w, http.StatusOK, map[string]any{"keys": infos})
}

// keyError gives an API key error its status: the caller's mistakes are
// 4xx and say what is wrong; a failing storage is 503.
func keyError(err error) error {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, auth.ErrAPIKeyRequest):
		status = http.StatusBadRequest
	case errors.Is(err, auth.ErrAPIKeyNotFound):
		status = http.StatusNotFound
	case errors.Is(err, auth.ErrAPIKeyConflict):
		status = http.StatusConflict
	case errors.Is(err, auth.ErrStorage):
		status = http.StatusServiceUnavailable
	}
	return caddy.APIError{HTTPStatus: status, Err: err}
}

func badRequest(format string, args ...any) error {
	return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf(format, args...)}
}

func writeAdminJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store") // the answer to a creation holds a key
	w.WriteHeader(status)
	_, err = w.Write(append(b, '\n'))
	return err
}
