package simulator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LoRA adapters as vLLM serves them (--enable-lora, with
// VLLM_ALLOW_RUNTIME_LORA_UPDATING=True for the load and unload
// endpoints): each loaded adapter is a model of its own in /v1/models
// (parent: the base model, root: its path), a request names it as its
// model, and vllm:lora_requests_info tells which adapters the running
// and waiting requests use. A load takes Config.LoRALoadDelay; the
// adapter is usable once it returns.

// loraState is the adapters a Server has loaded and their counters.
type loraState struct {
	mu      sync.Mutex
	loaded  map[string]loraAdapter
	loading map[string]bool  // loads under way, refused a second time
	running map[string]int64 // requests in flight per adapter
	// The counters of Stats.
	loads, unloads int64
	requests       map[string]int64
}

type loraAdapter struct {
	path    string
	created int64
}

func newLoRAState(cfg Config) *loraState {
	l := &loraState{loaded: map[string]loraAdapter{}, loading: map[string]bool{},
		running: map[string]int64{}, requests: map[string]int64{}}
	l.preload(cfg)
	return l
}

// preload loads cfg's LoRAs not loaded yet, at once.
func (l *loraState) preload(cfg Config) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, spec := range loraSpecs(cfg.LoRAs) {
		name, path := splitLoRA(spec)
		if _, ok := l.loaded[name]; name != "" && !ok {
			l.loaded[name] = loraAdapter{path: path, created: time.Now().Unix()}
		}
	}
}

// splitLoRA reads "name" or "name=path"; the path defaults to the name.
func splitLoRA(spec string) (name, path string) {
	name, path, ok := strings.Cut(strings.TrimSpace(spec), "=")
	if !ok || path == "" {
		path = name
	}
	return name, path
}

// loraEnabled reports whether cfg serves adapters.
func loraEnabled(cfg Config) bool { return cfg.EnableLoRA || cfg.LoRAs != "" }

// loraSpecs splits Config.LoRAs.
func loraSpecs(list string) []string {
	if strings.TrimSpace(list) == "" {
		return nil
	}
	return strings.Split(list, ",")
}

// loraRequest is the body of the load and unload endpoints.
type loraRequest struct {
	Name string `json:"lora_name"`
	Path string `json:"lora_path"`
}

// handleLoadLoRA answers POST /v1/load_lora_adapter as vLLM does: 200
// with a line of text once loaded, 400 for a missing field or an adapter
// already loaded. A load under way for the same name is refused as
// already loaded too. Beyond MaxLoRAs, 400.
func (s *Server) handleLoadLoRA(ctx context.Context, w http.ResponseWriter, r *http.Request, cfg Config) {
	var req loraRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
		badRequest("Invalid request body: " + err.Error()).write(w)
		return
	}
	l := s.lora
	l.mu.Lock()
	l.loads++
	switch {
	case req.Name == "" || req.Path == "":
		l.mu.Unlock()
		badRequest("Both 'lora_name' and 'lora_path' must be provided.").write(w)
		return
	case l.has(req.Name):
		l.mu.Unlock()
		badRequest(fmt.Sprintf("The lora adapter '%s' has already been loaded.", req.Name)).write(w)
		return
	case cfg.MaxLoRAs > 0 && len(l.loaded)+len(l.loading) >= cfg.MaxLoRAs:
		l.mu.Unlock()
		badRequest(fmt.Sprintf("Cannot load the lora adapter '%s': %d adapters are loaded (max_loras).", req.Name, cfg.MaxLoRAs)).write(w)
		return
	}
	l.loading[req.Name] = true
	l.mu.Unlock()
	ok := sleep(ctx, cfg.LoRALoadDelay.D())
	l.mu.Lock()
	delete(l.loading, req.Name)
	if ok {
		l.loaded[req.Name] = loraAdapter{path: req.Path, created: time.Now().Unix()}
	}
	l.mu.Unlock()
	if !ok {
		return // the client left: nothing loaded
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprintf(w, "Success: LoRA adapter '%s' added successfully.", req.Name)
}

// handleUnloadLoRA answers POST /v1/unload_lora_adapter: 200, or vLLM's
// 404 for an adapter not loaded.
func (s *Server) handleUnloadLoRA(w http.ResponseWriter, r *http.Request) {
	var req loraRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil || req.Name == "" {
		badRequest("'lora_name' needs to be provided to unload a LoRA adapter.").write(w)
		return
	}
	l := s.lora
	l.mu.Lock()
	_, ok := l.loaded[req.Name]
	if ok {
		delete(l.loaded, req.Name)
		l.unloads++
	}
	l.mu.Unlock()
	if !ok {
		(&apiError{Status: http.StatusNotFound, Message: fmt.Sprintf("The lora adapter '%s' cannot be found.", req.Name)}).write(w)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprintf(w, "Success: LoRA adapter '%s' removed successfully.", req.Name)
}

// has reports whether name is loaded or loading; call with l.mu held.
func (l *loraState) has(name string) bool {
	_, ok := l.loaded[name]
	return ok || l.loading[name]
}

// begin checks the model a generating request names: the base model (or
// none) passes as it always did; a loaded adapter passes, counted as
// running until the returned end is called; anything else is vLLM's 404.
func (l *loraState) begin(cfg Config, model string) (adapter string, end func(), e *apiError) {
	if !loraEnabled(cfg) || model == "" || model == cfg.Model {
		return "", func() {}, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.loaded[model]; !ok {
		return "", nil, &apiError{Status: http.StatusNotFound, Message: fmt.Sprintf("The model `%s` does not exist.", model)}
	}
	l.requests[model]++
	l.running[model]++
	return model, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.running[model]--; l.running[model] <= 0 {
			delete(l.running, model)
		}
	}, nil
}

// cards are the loaded adapters as /v1/models lists them, by name.
func (l *loraState) cards(base string) []modelCard {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]modelCard, 0, len(l.loaded))
	for name, a := range l.loaded {
		parent := base
		out = append(out, modelCard{ID: name, Object: "model", Created: a.created, OwnedBy: "vllm", Root: a.path, Parent: &parent})
	}
	slices.SortFunc(out, func(a, b modelCard) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// infoLine is vllm:lora_requests_info: its value the time of the figure,
// its labels the adapters of the running and waiting requests and the cap.
func (l *loraState) infoLine(cfg Config) string {
	l.mu.Lock()
	running := make([]string, 0, len(l.running))
	for name := range l.running {
		running = append(running, name)
	}
	l.mu.Unlock()
	slices.Sort(running)
	maxLoRA := cfg.MaxLoRAs
	if maxLoRA == 0 {
		maxLoRA = 1 // vLLM's --max-loras default
	}
	return "# HELP vllm:lora_requests_info Running stats on lora requests.\n" +
		"# TYPE vllm:lora_requests_info gauge\n" +
		`vllm:lora_requests_info{max_lora="` + strconv.Itoa(maxLoRA) + `",running_lora_adapters="` +
		escapeLabel(strings.Join(running, ",")) + `",waiting_lora_adapters=""} ` +
		strconv.FormatFloat(float64(time.Now().UnixNano())/1e9, 'f', 3, 64) + "\n"
}

// stats fills st's adapter fields.
func (l *loraState) stats(st *Stats) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st.LoRALoads, st.LoRAUnloads = l.loads, l.unloads
	st.LoadedLoRAs = make([]string, 0, len(l.loaded))
	for name := range l.loaded {
		st.LoadedLoRAs = append(st.LoadedLoRAs, name)
	}
	slices.Sort(st.LoadedLoRAs)
	if len(l.requests) > 0 {
		st.LoRARequests = make(map[string]int64, len(l.requests))
		for name, n := range l.requests {
			st.LoRARequests[name] = n
		}
	}
}

// reset zeroes the counters; the adapters stay loaded.
func (l *loraState) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.loads, l.unloads = 0, 0
	clear(l.requests)
}

// The adapter endpoints' paths.
const (
	pathLoadLoRA   = "/v1/load_lora_adapter"
	pathUnloadLoRA = "/v1/unload_lora_adapter"
)
