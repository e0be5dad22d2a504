package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// The ping timer writes the headers from its own goroutine: headers set
// by the handler must go through the writer (run with -race).
func TestSSEWriterHeadersRaceFreeWithPings(t *testing.T) {
	rec := httptest.NewRecorder()
	s := newSSEWriter(rec, "total;dur=0")
	s.keepAlive(time.Microsecond)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 200; i++ {
			s.setHeader(routeHeader, "policy=p2c")
		}
	}()
	wg.Wait()
	if err := s.write([]byte("data: {}\n\n")); err != nil {
		t.Fatal(err)
	}
	s.close()
	if got := rec.Header().Get("Content-Type"); got != "text/event-stream" {
		t.Fatalf("Content-Type = %q", got)
	}
}

func TestSSEWriterCloseUnlessStarted(t *testing.T) {
	tests := []struct {
		name        string
		first       []byte // written before the check; nil: nothing
		wantStarted bool
	}{
		{"nothing sent: the caller answers with its own status", nil, false},
		{"stream under way: errors go in-band", []byte(": ping\n\n"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			s := newSSEWriter(rec, "")
			s.keepAlive(time.Hour)
			if tt.first != nil {
				if err := s.write(tt.first); err != nil {
					t.Fatal(err)
				}
			}
			if got := s.closeUnlessStarted(); got != tt.wantStarted {
				t.Fatalf("closeUnlessStarted = %v, want %v", got, tt.wantStarted)
			}
			err := s.write([]byte("data: x\n\n"))
			if tt.wantStarted {
				if err != nil || !strings.Contains(rec.Body.String(), "data: x") {
					t.Fatalf("in-band write after a started stream: err=%v body=%q", err, rec.Body.String())
				}
				return
			}
			if err == nil || rec.Code != http.StatusOK || rec.Body.Len() != 0 {
				t.Fatalf("a closed writer wrote: err=%v body=%q", err, rec.Body.String())
			}
		})
	}
}
