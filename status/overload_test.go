package status

import (
	"encoding/json"
	"strings"
	"testing"
)

// The sheddable requests shed count for their model over the window, and
// leave it with the window; the overload state passes to the page as given.
func TestShedCounted(t *testing.T) {
	rec, c := newTestRecorder()
	rec.Record(Request{Model: "qwen", Status: 429, Shed: true})
	rec.Record(Request{Model: "qwen", Status: 429, Shed: true})
	rec.Record(Request{Model: "qwen", Status: 429}) // busy: not shed
	rec.Record(Request{Model: "gemma", Status: 200})
	models := []Model{{Name: "qwen", Overload: &Overload{Queued: QueuedByClass{Critical: 1, Sheddable: 2}, Saturated: true}}, {Name: "gemma"}}
	s := rec.Snapshot(models)
	if s.Models[0].Shed != 2 || s.Models[1].Shed != 0 {
		t.Fatalf("shed %d and %d, want 2 and 0", s.Models[0].Shed, s.Models[1].Shed)
	}
	b, _ := json.Marshal(s.Models[0])
	if !strings.Contains(string(b), `"overload":{"queued":{"critical":1,"standard":0,"sheddable":2},"saturated":true`) {
		t.Errorf("JSON %s", b)
	}
	c.add(Window + BucketWidth)
	if s := rec.Snapshot(models); s.Models[0].Shed != 0 {
		t.Errorf("shed %d after the window, want 0", s.Models[0].Shed)
	}
}
