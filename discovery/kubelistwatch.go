package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"strconv"
	"time"
)

// listWatch follows one collection of the Kubernetes API the way client-go's
// reflector does, over plain HTTP and JSON: list (in pages) for the state
// and its resourceVersion, then watch from that version with bookmarks, and
// list again when the API says the version is too old (410 Gone). Objects
// are kept as raw JSON by name; the owner decodes what it needs.
type listWatch struct {
	client *kubeClient
	path   string     // the collection, e.g. /api/v1/namespaces/ns/pods
	query  url.Values // labelSelector, fieldSelector
	// changed is called with the complete state after a list and after
	// every change a watch brings; it must not keep the map.
	changed func(map[string]json.RawMessage)
	// relisted is called on each list after a 410 Gone.
	relisted func()
	// connected is called when a list or watch has been answered.
	connected func()

	objects map[string]json.RawMessage
	rv      string
}

// Timeouts of a list and of a watch (the server ends a watch after
// timeoutSeconds, chosen in [watchMin, 2*watchMin) so that many gateways'
// watches do not end together); a watch that sends nothing, not even a
// bookmark, for watchIdle longer is taken for a dead connection.
var (
	listTimeout = 30 * time.Second
	watchMin    = 5 * time.Minute
	watchIdle   = 30 * time.Second
)

// sync lists the collection into lw.objects and reports it.
func (lw *listWatch) sync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	objects := map[string]json.RawMessage{}
	q := cloneQuery(lw.query)
	q.Set("limit", "500")
	for {
		resp, err := lw.client.get(ctx, lw.path, q)
		if err != nil {
			return err
		}
		var list struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
				Continue        string `json:"continue"`
			} `json:"metadata"`
			Items []json.RawMessage `json:"items"`
		}
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("kubernetes list %s: %w", lw.path, err)
		}
		for _, item := range list.Items {
			objects[objectName(item)] = item
		}
		if list.Metadata.Continue == "" {
			lw.objects, lw.rv = objects, list.Metadata.ResourceVersion
			lw.changed(objects)
			return nil
		}
		q.Set("continue", list.Metadata.Continue)
	}
}

// watch follows changes from lw.rv until the server ends the watch
// (nil: watch again from the version reached), ctx ends, or an error
// (a 410 among them: list again).
func (lw *listWatch) watch(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := cloneQuery(lw.query)
	q.Set("watch", "1")
	q.Set("resourceVersion", lw.rv)
	q.Set("allowWatchBookmarks", "true")
	q.Set("timeoutSeconds", strconv.Itoa(int((watchMin+rand.N(watchMin))/time.Second)))
	idle := time.AfterFunc(watchIdle+watchMin*2, cancel) // until the first event
	defer idle.Stop()
	resp, err := lw.client.get(ctx, lw.path, q)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	lw.connected()
	dec := json.NewDecoder(resp.Body)
	for {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				return nil // the server ended the watch (timeoutSeconds)
			}
			return fmt.Errorf("kubernetes watch %s: %w", lw.path, err)
		}
		idle.Reset(watchIdle + watchMin*2)
		switch ev.Type {
		case "ERROR":
			var st struct {
				Code    int    `json:"code"`
				Reason  string `json:"reason"`
				Message string `json:"message"`
			}
			_ = json.Unmarshal(ev.Object, &st)
			return &apiError{Code: st.Code, Reason: st.Reason, Message: st.Message}
		case "BOOKMARK":
			lw.rv = resourceVersion(ev.Object)
		case "ADDED", "MODIFIED":
			lw.objects[objectName(ev.Object)] = ev.Object
			lw.rv = resourceVersion(ev.Object)
			lw.changed(lw.objects)
		case "DELETED":
			delete(lw.objects, objectName(ev.Object))
			lw.rv = resourceVersion(ev.Object)
			lw.changed(lw.objects)
		}
	}
}

// run lists and watches until ctx ends, calling failed after each error
// and pausing with exponential backoff (with jitter) before trying again.
func (lw *listWatch) run(ctx context.Context, minBackoff, maxBackoff time.Duration, failed func(error, time.Duration)) {
	var backoff time.Duration
	listed := false
	for ctx.Err() == nil {
		var err error
		if !listed {
			if err = lw.sync(ctx); err == nil {
				listed = true
				lw.connected()
			}
		} else {
			err = lw.watch(ctx)
			if gone(err) {
				// History compacted past our version: the state may have
				// changed meanwhile, so list again at once.
				listed = false
				if lw.relisted != nil {
					lw.relisted()
				}
				continue
			}
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			backoff = 0
			continue
		}
		// After a failed watch the next one starts from the version
		// reached, as client-go's does: the API replays what was missed,
		// or answers 410 and we list again.
		backoff = min(max(2*backoff, minBackoff), maxBackoff)
		failed(err, backoff)
		t := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func cloneQuery(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}

type objectMeta struct {
	Metadata struct {
		Name              string            `json:"name"`
		ResourceVersion   string            `json:"resourceVersion"`
		DeletionTimestamp *string           `json:"deletionTimestamp"`
		Labels            map[string]string `json:"labels"`
	} `json:"metadata"`
}

func objectName(raw json.RawMessage) string {
	var m objectMeta
	_ = json.Unmarshal(raw, &m)
	return m.Metadata.Name
}

func resourceVersion(raw json.RawMessage) string {
	var m objectMeta
	_ = json.Unmarshal(raw, &m)
	return m.Metadata.ResourceVersion
}
