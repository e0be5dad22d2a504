package adapters

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/llmedge/llmedge/backends/pool"
)

// TestLister: the adapters of a replica are the models its list gives a
// parent; the replica's key is sent; replicas that left are forgotten.
func TestLister(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"data":[{"id":"base","parent":null},{"id":"sql","parent":"base"},{"id":"poem","parent":"base"}]}`))
	}))
	defer srv.Close()
	rs := replicas(t, srv.URL)
	table := NewTable()
	table.MarkLoaded("http://gone:1", "x")
	l := NewLister("qwen", func() []*pool.Replica { return rs }, func(*pool.Replica) string { return "k" }, table,
		srv.Client(), 20*time.Millisecond, nil)
	l.Start()
	defer l.Stop()
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Equal(table.View(srv.URL).Loaded, []string{"poem", "sql"}) || table.Held("x") {
		if time.Now().After(deadline) {
			t.Fatalf("view %+v, x held %v", table.View(srv.URL), table.Held("x"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
