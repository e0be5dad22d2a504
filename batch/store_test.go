package batch

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/pgtest"
)

var alice = Owner{Subject: "alice", Provider: "keys", KeyID: "k1", Team: "red"}

// clock is a settable clock for leases.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func openSQLite(t *testing.T) *SQLStore {
	t.Helper()
	s, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// postgres starts one PostgreSQL for the test and returns its DSN
// (skipping without PostgreSQL, as the ledger's tests do).
func postgres(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	return pgtest.Start(t).DSN
}

func openPostgres(t *testing.T, dsn string) *SQLStore {
	t.Helper()
	s, err := OpenPostgres(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// reset empties the batch tables (the PostgreSQL subtests share one
// database).
func reset(t *testing.T, s *SQLStore) {
	t.Helper()
	for _, table := range []string{"batch_files", "batch_file_chunks", "batch_batches", "batch_lines", "batch_results"} {
		if _, err := s.db.Exec(`DELETE FROM ` + table); err != nil {
			t.Fatal(err)
		}
	}
}

// chat is an input line of a chat batch.
func chat(id, model string) string {
	return fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"model":%q,"messages":[{"role":"user","content":"hi %s"}]}}`, id, model, id)
}

func chatLines(n int, model string) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(chat(fmt.Sprintf("req-%d", i), model))
		b.WriteByte('\n')
	}
	return b.String()
}

// validBatch stores content as alice's file, creates a chat batch of
// it and validates it.
func validBatch(t *testing.T, s *SQLStore, content string) Batch {
	t.Helper()
	ctx := context.Background()
	f, err := s.PutFile(ctx, File{Owner: alice, Purpose: "batch", Filename: "in.jsonl"}, strings.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.CreateBatch(ctx, Batch{Owner: alice, Endpoint: "/v1/chat/completions", InputFileID: f.ID})
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Validate(ctx, "validator", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if v.ID != b.ID {
		t.Fatalf("Validate took %s, want %s", v.ID, b.ID)
	}
	return v
}

func readAll(t *testing.T, s *SQLStore, id string) string {
	t.Helper()
	rc, err := s.OpenFile(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// outLine is an output file's line.
type outLine struct {
	ID       string `json:"id"`
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int             `json:"status_code"`
		RequestID  string          `json:"request_id"`
		Body       json.RawMessage `json:"body"`
	} `json:"response"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func outLines(t *testing.T, s *SQLStore, id string) []outLine {
	t.Helper()
	if id == "" {
		return nil
	}
	var out []outLine
	for _, l := range strings.Split(strings.TrimSuffix(readAll(t, s, id), "\n"), "\n") {
		var o outLine
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatalf("output line %q: %v", l, err)
		}
		out = append(out, o)
	}
	return out
}

func ok(l Line) Result {
	return Result{BatchID: l.BatchID, CustomID: l.CustomID, Index: l.Index, StatusCode: 200, RequestID: "r-" + l.CustomID,
		Body: []byte(`{"object":"chat.completion","id":"` + l.CustomID + `"}`)}
}

// TestSQLite runs the store's tests on SQLite.
func TestSQLite(t *testing.T) {
	storeTests(t, func(t *testing.T) *SQLStore { return openSQLite(t) })
}

// TestPostgres runs the store's tests on a real PostgreSQL.
func TestPostgres(t *testing.T) {
	dsn := postgres(t)
	storeTests(t, func(t *testing.T) *SQLStore {
		s := openPostgres(t, dsn)
		reset(t, s)
		return s
	})
}

func storeTests(t *testing.T, open func(t *testing.T) *SQLStore) {
	t.Run("files", func(t *testing.T) { testFiles(t, open(t)) })
	t.Run("validation", func(t *testing.T) { testValidation(t, open) })
	t.Run("claims and leases", func(t *testing.T) { testLeases(t, open(t)) })
	t.Run("complete once", func(t *testing.T) { testCompleteOnce(t, open(t)) })
	t.Run("finalize", func(t *testing.T) { testFinalize(t, open(t)) })
	t.Run("cancel", func(t *testing.T) { testCancel(t, open(t)) })
	t.Run("expiry", func(t *testing.T) { testExpiry(t, open(t)) })
	t.Run("expired before any line ran", func(t *testing.T) { testExpiredBeforeRun(t, open(t)) })
	t.Run("cancel while validating", func(t *testing.T) { testCancelWhileValidating(t, open(t)) })
	t.Run("cancel midway through validation", func(t *testing.T) { testCancelMidValidation(t, open(t)) })
	t.Run("validator loses its lease", func(t *testing.T) { testValidatorLosesLease(t, open(t)) })
	t.Run("validator loses its lease midway", func(t *testing.T) { testValidatorLosesLeaseMidway(t, open(t)) })
	t.Run("unfinished", func(t *testing.T) { testUnfinished(t, open(t)) })
}

func testFiles(t *testing.T, s *SQLStore) {
	ctx := context.Background()
	// Two and a half chunks, every byte checked on the way back.
	content := bytes.Repeat([]byte("0123456789abcdef"), chunkBytes*5/32)
	f, err := s.PutFile(ctx, File{Owner: alice, Purpose: "batch", Filename: "big.jsonl"}, bytes.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(f.ID, "file-") || f.Bytes != int64(len(content)) || f.CreatedAt.IsZero() {
		t.Fatalf("PutFile = %+v", f)
	}
	var chunks int
	if err := s.db.QueryRow(s.d.bind(`SELECT COUNT(*) FROM batch_file_chunks WHERE file_id = ?`), f.ID).Scan(&chunks); err != nil || chunks != 3 {
		t.Fatalf("chunks = %d, %v; want 3", chunks, err)
	}
	if got := readAll(t, s, f.ID); got != string(content) {
		t.Fatalf("read back %d bytes, want %d the same", len(got), len(content))
	}
	bob := Owner{Subject: "bob", Provider: "keys"}
	g, err := s.PutFile(ctx, File{Owner: bob, Purpose: "batch", Filename: "empty.jsonl"}, strings.NewReader(""))
	if err != nil || g.Bytes != 0 {
		t.Fatal(g, err)
	}
	if got := readAll(t, s, g.ID); got != "" {
		t.Fatalf("empty file read %q", got)
	}
	h, err := s.PutFile(ctx, File{Owner: alice, Purpose: "batch_output", Filename: "out\x00\xff.jsonl"}, strings.NewReader("x"))
	if err != nil || h.Filename != "out\uFFFD.jsonl" {
		t.Fatalf("PutFile of a name with a NUL and a bad byte = %q, %v", h.Filename, err)
	}
	list := func(owner, purpose, after string, limit int) []string {
		fs, err := s.Files(ctx, owner, purpose, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, f := range fs {
			ids = append(ids, f.ID)
		}
		return ids
	}
	for _, c := range []struct {
		owner, purpose, after string
		limit                 int
		want                  []string
	}{
		{"", "", "", 0, []string{h.ID, g.ID, f.ID}},
		{alice.Key(), "", "", 0, []string{h.ID, f.ID}},
		{alice.Key(), "batch", "", 0, []string{f.ID}},
		{"", "", h.ID, 1, []string{g.ID}},
		{bob.Key(), "", "", 0, []string{g.ID}},
	} {
		if got := list(c.owner, c.purpose, c.after, c.limit); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("Files(%q, %q, %q, %d) = %v, want %v", c.owner, c.purpose, c.after, c.limit, got, c.want)
		}
	}
	if got, err := s.File(ctx, f.ID); err != nil || got.Owner.Key() != alice.Key() || got.Owner.Team != "red" || got.Filename != "big.jsonl" {
		t.Fatalf("File = %+v, %v", got, err)
	}
	if err := s.DeleteFile(ctx, f.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.File(ctx, f.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("File after delete = %v", err)
	}
	if _, err := s.OpenFile(ctx, f.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("OpenFile after delete = %v", err)
	}
	if err := s.db.QueryRow(s.d.bind(`SELECT COUNT(*) FROM batch_file_chunks WHERE file_id = ?`), f.ID).Scan(&chunks); err != nil || chunks != 0 {
		t.Fatalf("chunks after delete = %d, %v", chunks, err)
	}
	if err := s.DeleteFile(ctx, f.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("DeleteFile twice = %v", err)
	}
	// Files past their expiry, and uploads abandoned a day ago, are swept.
	e, _ := s.PutFile(ctx, File{Owner: alice, Purpose: "batch", ExpiresAt: time.Now().Add(time.Hour)}, strings.NewReader("x"))
	if _, err := s.exec(ctx, `INSERT INTO batch_files (id, owner_key, owner, purpose, filename, bytes, complete, created_ms, expires_ms)
		VALUES ('file-abandoned', '', '{}', 'batch', '', 0, 0, ?, 0)`, ms(time.Now().Add(-25*time.Hour))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finalize(ctx, "f", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.File(ctx, e.ID); err != nil {
		t.Fatalf("a file before its expiry: %v", err)
	}
	if _, err := s.Finalize(ctx, "f", time.Now().Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := s.db.QueryRow(s.d.bind(`SELECT COUNT(*) FROM batch_files WHERE id IN (?, ?)`), e.ID, "file-abandoned").Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d expired or abandoned files left, %v", left, err)
	}
	// A failed upload leaves nothing.
	_, err = s.PutFile(ctx, File{Owner: alice, Purpose: "batch"}, io.MultiReader(strings.NewReader(strings.Repeat("x", chunkBytes+10)), errReader{}))
	if err == nil {
		t.Fatal("PutFile of a failing reader succeeded")
	}
	var rows int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM batch_file_chunks`).Scan(&rows); err != nil || rows != 1 { // g's? no: h's one chunk
		t.Fatalf("chunks after a failed upload = %d, %v; want 1 (h's)", rows, err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

func testValidation(t *testing.T, open func(t *testing.T) *SQLStore) {
	long := `{"custom_id":"big","method":"POST","url":"/v1/chat/completions","body":{"model":"m","pad":"` + strings.Repeat("x", 300) + `"}}`
	for _, c := range []struct {
		name    string
		content string
		limits  Limits
		status  Status
		errs    []string // code@line/param
		total   int
	}{
		{name: "valid", content: chat("a", "m") + "\n\n" + chat("b", "m") + "\r\n  \n" + chat("c", "m"), status: StatusInProgress, total: 3},
		{name: "invalid json", content: chat("a", "m") + "\n{invalid json here", status: StatusFailed, errs: []string{"invalid_json_line@2/"}},
		{name: "not an object", content: `[1,2]`, status: StatusFailed, errs: []string{"invalid_json_line@1/"}},
		{name: "missing fields", status: StatusFailed, content: `{"method":"POST","url":"/v1/chat/completions","body":{"model":"m"}}
{"custom_id":"b","url":"/v1/chat/completions","body":{"model":"m"}}
{"custom_id":"c","method":"POST","body":{"model":"m"}}
{"custom_id":"d","method":"POST","url":"/v1/chat/completions"}`,
			errs: []string{"missing_required_parameter@1/custom_id", "missing_required_parameter@2/method", "missing_required_parameter@3/url", "missing_required_parameter@4/body"}},
		{name: "custom_id not a string", content: `{"custom_id":7,"method":"POST","url":"/v1/chat/completions","body":{"model":"m"}}`,
			status: StatusFailed, errs: []string{"invalid_type@1/custom_id"}},
		{name: "NUL in custom_id", content: strings.Replace(chat("a", "m"), `"a"`, `"a\u0000b"`, 1), status: StatusFailed, errs: []string{"invalid_value@1/custom_id"}},
		{name: "duplicate", content: chat("a", "m") + "\n" + chat("b", "m") + "\n" + chat("a", "m"), status: StatusFailed, errs: []string{"duplicate_custom_id@3/custom_id"}},
		{name: "method", content: strings.Replace(chat("a", "m"), `"POST"`, `"GET"`, 1), status: StatusFailed, errs: []string{"invalid_method@1/method"}},
		{name: "url", content: strings.Replace(chat("a", "m"), `/v1/chat/completions`, `/v1/embeddings`, 1), status: StatusFailed, errs: []string{"invalid_url@1/url"}},
		{name: "body not an object", content: `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":"hi"}`, status: StatusFailed, errs: []string{"invalid_type@1/body"}},
		{name: "no model", content: `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"messages":[]}}`, status: StatusFailed, errs: []string{"invalid_request@1/body.model"}},
		{name: "model mismatch", content: chat("a", "m") + "\n" + chat("b", "other"), status: StatusFailed, errs: []string{"mismatched_model@2/body.model"}},
		{name: "stream", content: chat("a", "m") + "\n" + strings.Replace(chat("b", "m"), `"model":"m"`, `"model":"m","stream":true`, 1),
			status: StatusFailed, errs: []string{"streaming_unsupported@2/body.stream"}},
		{name: "stream false is fine", content: strings.Replace(chat("b", "m"), `"model":"m"`, `"model":"m","stream":false`, 1), status: StatusInProgress, total: 1},
		{name: "too many", content: chatLines(4, "m"), limits: Limits{MaxLines: 3}, status: StatusFailed, errs: []string{"too_many_tasks@4/"}},
		{name: "line too long", content: chat("a", "m") + "\n" + long + "\n" + chat("c", "m"), limits: Limits{MaxLineBytes: 300}, status: StatusFailed, errs: []string{"line_too_large@2/"}},
		{name: "empty", content: "\n \n", status: StatusFailed, errs: []string{"empty_file@0/"}},
		{name: "errors capped", content: strings.Repeat("nope\n", 150), status: StatusFailed, errs: func() []string {
			var e []string
			for i := 1; i <= maxErrors; i++ {
				e = append(e, fmt.Sprintf("invalid_json_line@%d/", i))
			}
			return e
		}()},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := open(t)
			s.Limits = c.limits
			b := validBatch(t, s, c.content)
			var errs []string
			for _, e := range b.Errors {
				errs = append(errs, fmt.Sprintf("%s@%d/%s", e.Code, e.Line, e.Param))
				if e.Message == "" {
					t.Errorf("error %s has no message", e.Code)
				}
			}
			if b.Status != c.status || fmt.Sprint(errs) != fmt.Sprint(c.errs) || b.Counts.Total != c.total {
				t.Fatalf("Validate = %s, errors %v, total %d; want %s, %v, %d", b.Status, errs, b.Counts.Total, c.status, c.errs, c.total)
			}
			var lines int
			if err := s.db.QueryRow(s.d.bind(`SELECT COUNT(*) FROM batch_lines WHERE batch_id = ?`), b.ID).Scan(&lines); err != nil || lines != c.total {
				t.Fatalf("stored lines = %d, %v; want %d", lines, err, c.total)
			}
			switch b.Status {
			case StatusInProgress:
				if b.Model != "m" || b.InProgressAt.IsZero() {
					t.Fatalf("in progress batch = %+v", b)
				}
			case StatusFailed:
				if b.FailedAt.IsZero() {
					t.Fatal("failed batch without FailedAt")
				}
			}
		})
	}
	t.Run("another owner's file", func(t *testing.T) {
		s := open(t)
		ctx := context.Background()
		f, _ := s.PutFile(ctx, File{Owner: Owner{Subject: "bob"}, Purpose: "batch"}, strings.NewReader(chat("a", "m")))
		if _, err := s.CreateBatch(ctx, Batch{Owner: alice, Endpoint: "/v1/chat/completions", InputFileID: f.ID}); err != nil {
			t.Fatal(err)
		}
		b, err := s.Validate(ctx, "w", time.Minute)
		if err != nil || b.Status != StatusFailed || len(b.Errors) != 1 || b.Errors[0].Code != "invalid_request" || b.Errors[0].Param != "input_file_id" {
			t.Fatalf("Validate = %+v, %v", b, err)
		}
		if _, err := s.Validate(ctx, "w", time.Minute); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Validate with none left = %v", err)
		}
	})
	t.Run("lapsed validation taken over", func(t *testing.T) {
		s := open(t)
		c := &clock{t: time.Now()}
		s.now = c.now
		ctx := context.Background()
		f, _ := s.PutFile(ctx, File{Owner: alice, Purpose: "batch"}, strings.NewReader(chatLines(3, "m")))
		b, _ := s.CreateBatch(ctx, Batch{Owner: alice, Endpoint: "/v1/chat/completions", InputFileID: f.ID})
		// A validator that died: its lease on the batch, a line stored.
		if _, err := s.exec(ctx, `UPDATE batch_batches SET lease_owner = 'dead', lease_until = ? WHERE id = ?`, ms(c.now().Add(time.Minute)), b.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.exec(ctx, `INSERT INTO batch_lines (batch_id, idx, custom_id, body, attempts, done, lease_owner, lease_until) VALUES (?, 1, 'req-0', ?, 0, 0, '', 0)`, b.ID, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Validate(ctx, "w", time.Minute); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Validate of a leased batch = %v", err)
		}
		c.add(2 * time.Minute)
		v, err := s.Validate(ctx, "w", time.Minute)
		if err != nil || v.Status != StatusInProgress || v.Counts.Total != 3 {
			t.Fatalf("Validate after the lease lapsed = %+v, %v", v, err)
		}
	})
}

func testLeases(t *testing.T, s *SQLStore) {
	ctx := context.Background()
	c := &clock{t: time.Now()}
	s.now = c.now
	b := validBatch(t, s, chatLines(5, "m"))
	if models, err := s.Models(ctx); err != nil || fmt.Sprint(models) != "[m]" {
		t.Fatalf("Models = %v, %v", models, err)
	}
	if got, err := s.Claim(ctx, "a", "other", 5, time.Minute); err != nil || len(got) != 0 {
		t.Fatalf("Claim of another model = %v, %v", got, err)
	}
	a, err := s.Claim(ctx, "a", "m", 2, time.Minute)
	if err != nil || len(a) != 2 || a[0].Index != 1 || a[1].Index != 2 || a[0].CustomID != "req-0" {
		t.Fatalf("Claim = %+v, %v", a, err)
	}
	if l := a[0]; l.Owner.Key() != alice.Key() || l.Endpoint != "/v1/chat/completions" || l.Model != "m" || l.Attempts != 0 ||
		!l.Created.Equal(b.CreatedAt) ||
		!strings.Contains(string(l.Body), `"hi req-0"`) {
		t.Fatalf("claimed line = %+v", l)
	}
	bl, err := s.Claim(ctx, "b", "m", 10, time.Minute)
	if err != nil || len(bl) != 3 || bl[0].Index != 3 {
		t.Fatalf("Claim by b = %+v, %v", bl, err)
	}
	if got, _ := s.Claim(ctx, "b", "m", 10, time.Minute); len(got) != 0 {
		t.Fatalf("Claim with every line held = %v", got)
	}
	if models, _ := s.Models(ctx); len(models) != 0 {
		t.Fatalf("Models with every line held = %v", models)
	}
	// Release gives b's lines back without an attempt.
	if err := s.Release(ctx, "b", bl[:2]); err != nil {
		t.Fatal(err)
	}
	again, _ := s.Claim(ctx, "c", "m", 10, time.Minute)
	if len(again) != 2 || again[0].Index != 3 || again[0].Attempts != 0 {
		t.Fatalf("Claim after Release = %+v", again)
	}
	// Retry gives a line back with an attempt.
	if err := s.Retry(ctx, "b", bl[2:]); err != nil {
		t.Fatal(err)
	}
	retried, _ := s.Claim(ctx, "c", "m", 10, time.Minute)
	if len(retried) != 1 || retried[0].Index != 5 || retried[0].Attempts != 1 {
		t.Fatalf("Claim after Retry = %+v", retried)
	}
	// a renews halfway; c does not: c's lines lapse, a's hold.
	c.add(40 * time.Second)
	if err := s.Renew(ctx, "a", a, time.Minute); err != nil {
		t.Fatal(err)
	}
	c.add(30 * time.Second)
	taken, err := s.Claim(ctx, "d", "m", 10, time.Minute)
	if err != nil || len(taken) != 3 {
		t.Fatalf("Claim of lapsed leases = %+v, %v", taken, err)
	}
	for _, l := range taken {
		if want := map[int]int{3: 1, 4: 1, 5: 2}[l.Index]; l.Attempts != want {
			t.Errorf("line %d taken over with Attempts %d, want %d", l.Index, l.Attempts, want)
		}
	}
	// c lost them: its renewal and its result are refused.
	if err := s.Renew(ctx, "c", again, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Renew of lost leases = %v", err)
	}
	if err := s.Complete(ctx, "c", ok(again[0])); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Complete of a lost line = %v", err)
	}
	if err := s.Complete(ctx, "d", ok(taken[0])); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Batch(ctx, b.ID)
	if got.Counts != (Counts{Total: 5, Completed: 1}) {
		t.Fatalf("counts = %+v", got.Counts)
	}
	// A cancelled batch's lines are not claimed.
	if err := s.Release(ctx, "a", a); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Claim(ctx, "e", "m", 10, time.Minute); len(got) != 0 {
		t.Fatalf("Claim of a cancelling batch's lines = %v", got)
	}
}

func testCompleteOnce(t *testing.T, s *SQLStore) {
	ctx := context.Background()
	b := validBatch(t, s, chatLines(3, "m"))
	ls, _ := s.Claim(ctx, "a", "m", 3, time.Minute)
	// A result's usage is written in its transaction, with the store's
	// dialect, once: not for a result refused, and a usage that fails
	// takes the result with it.
	usages := 0
	withUsage := func(r Result, fail bool) Result {
		r.Usage = func(_ context.Context, tx *sql.Tx, dialect string) error {
			if tx == nil || dialect != s.d.name {
				t.Errorf("usage written in %v, dialect %q", tx, dialect)
			}
			if fail {
				return errors.New("ledger down")
			}
			usages++
			return nil
		}
		return r
	}
	if err := s.Complete(ctx, "a", withUsage(ok(ls[0]), true)); err == nil {
		t.Fatal("Complete with its usage failing succeeded")
	}
	if err := s.Complete(ctx, "a", withUsage(ok(ls[0]), false)); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, "a", withUsage(ok(ls[0]), false)); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("second Complete = %v", err)
	}
	if usages != 1 {
		t.Fatalf("usage written %d times, want once", usages)
	}
	// A result for the custom_id written already (another worker's,
	// raced in) refuses the line's own and leaves the counts.
	if _, err := s.exec(ctx, `INSERT INTO batch_results (batch_id, idx, custom_id, failed, status_code, request_id, body, err_code, err_message, err_param)
		VALUES (?, ?, ?, 0, 200, '', ?, '', '', '')`, b.ID, 99, ls[1].CustomID, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, "a", ok(ls[1])); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Complete of a custom_id answered already = %v", err)
	}
	failed := ok(ls[2])
	failed.StatusCode = 400
	if err := s.Complete(ctx, "a", failed); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Batch(ctx, b.ID)
	if got.Counts != (Counts{Total: 3, Completed: 1, Failed: 1}) {
		t.Fatalf("counts = %+v", got.Counts)
	}
}

func testFinalize(t *testing.T, s *SQLStore) {
	ctx := context.Background()
	b := validBatch(t, s, chatLines(4, "m"))
	if done, err := s.Finalize(ctx, "f", time.Now()); err != nil || len(done) != 0 {
		t.Fatalf("Finalize with lines left = %v, %v", done, err)
	}
	ls, _ := s.Claim(ctx, "a", "m", 4, time.Minute)
	results := []Result{ok(ls[0]), ok(ls[1]), ok(ls[2]), ok(ls[3])}
	results[1].StatusCode, results[1].Body = 400, []byte(`{"error":{"message":"bad max_tokens","type":"invalid_request_error","code":"invalid_value"}}`)
	results[2].StatusCode, results[2].Body, results[2].Err = 0, nil, &LineError{Code: "server_error", Message: "tried 3 times"}
	results[3].Body = []byte("plain text")
	for _, r := range results {
		if err := s.Complete(ctx, "a", r); err != nil {
			t.Fatal(err)
		}
	}
	done, err := s.Finalize(ctx, "f", time.Now())
	if err != nil || len(done) != 1 {
		t.Fatalf("Finalize = %v, %v", done, err)
	}
	got := done[0]
	if got.ID != b.ID || got.Status != StatusCompleted || got.CompletedAt.IsZero() || got.FinalizingAt.IsZero() ||
		got.Counts != (Counts{Total: 4, Completed: 2, Failed: 2}) || got.OutputFileID == "" || got.ErrorFileID == "" {
		t.Fatalf("finalized = %+v", got)
	}
	out := outLines(t, s, got.OutputFileID)
	if len(out) != 2 || out[0].CustomID != "req-0" || out[1].CustomID != "req-3" || out[0].Error != nil ||
		out[0].Response.StatusCode != 200 || out[0].Response.RequestID != "r-req-0" || string(out[0].Response.Body) != `{"object":"chat.completion","id":"req-0"}` ||
		string(out[1].Response.Body) != `"plain text"` || !strings.HasPrefix(out[0].ID, "batch_req_") || out[0].ID == out[1].ID {
		t.Fatalf("output = %+v", out)
	}
	errs := outLines(t, s, got.ErrorFileID)
	if len(errs) != 2 || errs[0].CustomID != "req-1" || errs[0].Response.StatusCode != 400 || errs[0].Error.Code != "invalid_value" ||
		errs[0].Error.Message != "bad max_tokens" || errs[1].Response != nil || errs[1].Error.Code != "server_error" {
		t.Fatalf("errors = %+v", errs)
	}
	f, err := s.File(ctx, got.OutputFileID)
	if err != nil || f.Purpose != "batch_output" || f.Owner.Key() != alice.Key() {
		t.Fatalf("output file = %+v, %v", f, err)
	}
	var left int
	_ = s.db.QueryRow(s.d.bind(`SELECT (SELECT COUNT(*) FROM batch_lines WHERE batch_id = ?) + (SELECT COUNT(*) FROM batch_results WHERE batch_id = ?)`), b.ID, b.ID).Scan(&left)
	if left != 0 {
		t.Fatalf("%d lines and results left after finalizing", left)
	}
	if _, err := s.Cancel(ctx, b.ID); !errors.Is(err, ErrConflict) {
		t.Fatalf("Cancel of a completed batch = %v", err)
	}
	// All successes: no error file.
	b2 := validBatch(t, s, chatLines(2, "m"))
	ls, _ = s.Claim(ctx, "a", "m", 4, time.Minute)
	for _, l := range ls {
		_ = s.Complete(ctx, "a", ok(l))
	}
	done, _ = s.Finalize(ctx, "f", time.Now())
	if len(done) != 1 || done[0].ID != b2.ID || done[0].ErrorFileID != "" || len(outLines(t, s, done[0].OutputFileID)) != 2 {
		t.Fatalf("finalized = %+v", done)
	}
	// A finalization leased by another worker is not taken; a lapsed one is.
	b3 := validBatch(t, s, chatLines(1, "m"))
	ls, _ = s.Claim(ctx, "a", "m", 4, time.Minute)
	_ = s.Complete(ctx, "a", ok(ls[0]))
	if _, err := s.exec(ctx, `UPDATE batch_batches SET lease_owner = 'dead', lease_until = ? WHERE id = ?`, ms(time.Now().Add(time.Minute)), b3.ID); err != nil {
		t.Fatal(err)
	}
	if done, _ := s.Finalize(ctx, "f", time.Now()); len(done) != 0 {
		t.Fatalf("Finalize of a leased batch = %+v", done)
	}
	if done, _ := s.Finalize(ctx, "f", time.Now().Add(2*time.Minute)); len(done) != 1 || done[0].Status != StatusCompleted {
		t.Fatalf("Finalize after the lease lapsed = %+v", done)
	}
}

func testCancel(t *testing.T, s *SQLStore) {
	ctx := context.Background()
	b := validBatch(t, s, chatLines(5, "m"))
	ls, _ := s.Claim(ctx, "a", "m", 2, time.Minute)
	if err := s.Complete(ctx, "a", ok(ls[0])); err != nil {
		t.Fatal(err)
	}
	c, err := s.Cancel(ctx, b.ID)
	if err != nil || c.Status != StatusCancelling || c.CancellingAt.IsZero() {
		t.Fatalf("Cancel = %+v, %v", c, err)
	}
	if c, err := s.Cancel(ctx, b.ID); err != nil || c.Status != StatusCancelling {
		t.Fatalf("Cancel again = %+v, %v", c, err)
	}
	// ls[1] still runs: the batch waits for it.
	if done, err := s.Finalize(ctx, "f", time.Now()); err != nil || len(done) != 0 {
		t.Fatalf("Finalize with a line running = %+v, %v", done, err)
	}
	if got, _ := s.Batch(ctx, b.ID); got.Status != StatusCancelling {
		t.Fatalf("status = %s", got.Status)
	}
	if err := s.Complete(ctx, "a", ok(ls[1])); err != nil {
		t.Fatal(err)
	}
	done, err := s.Finalize(ctx, "f", time.Now())
	if err != nil || len(done) != 1 || done[0].Status != StatusCancelled || done[0].CancelledAt.IsZero() || done[0].ErrorFileID != "" {
		t.Fatalf("Finalize = %+v, %v", done, err)
	}
	if out := outLines(t, s, done[0].OutputFileID); len(out) != 2 || done[0].Counts != (Counts{Total: 5, Completed: 2}) {
		t.Fatalf("output %+v, counts %+v", out, done[0].Counts)
	}
	// A batch cancelled while validating ends with no files.
	f, _ := s.PutFile(ctx, File{Owner: alice, Purpose: "batch"}, strings.NewReader(chat("a", "m")))
	v, _ := s.CreateBatch(ctx, Batch{Owner: alice, Endpoint: "/v1/chat/completions", InputFileID: f.ID, Metadata: map[string]string{"job": "eval-7"}})
	if got, err := s.Batch(ctx, v.ID); err != nil || got.Metadata["job"] != "eval-7" || got.CompletionWindow != 24*time.Hour ||
		got.ExpiresAt.Sub(got.CreatedAt) != 24*time.Hour || got.InputFileID != f.ID {
		t.Fatalf("Batch = %+v, %v", got, err)
	}
	if _, err := s.Cancel(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Validate(ctx, "w", time.Minute); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Validate of a cancelled batch = %v", err)
	}
	done, _ = s.Finalize(ctx, "f", time.Now())
	if len(done) != 1 || done[0].Status != StatusCancelled || done[0].OutputFileID != "" {
		t.Fatalf("Finalize = %+v", done)
	}
	all, err := s.Batches(ctx, "", "", 0)
	if err != nil || len(all) != 2 || all[0].ID != v.ID || all[1].ID != b.ID {
		t.Fatalf("Batches = %+v, %v", all, err)
	}
	if page, _ := s.Batches(ctx, alice.Key(), v.ID, 5); len(page) != 1 || page[0].ID != b.ID || page[0].Owner.KeyID != "k1" {
		t.Fatalf("Batches after the newest = %+v", page)
	}
	if none, _ := s.Batches(ctx, Owner{Subject: "bob"}.Key(), "", 5); len(none) != 0 {
		t.Fatalf("bob's Batches = %+v", none)
	}
	if _, err := s.Cancel(ctx, "batch_none"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Cancel of none = %v", err)
	}
}

func testExpiry(t *testing.T, s *SQLStore) {
	ctx := context.Background()
	b := validBatch(t, s, chatLines(4, "m"))
	ls, _ := s.Claim(ctx, "a", "m", 2, time.Minute)
	if err := s.Complete(ctx, "a", ok(ls[0])); err != nil {
		t.Fatal(err)
	}
	done, err := s.Finalize(ctx, "f", b.ExpiresAt.Add(time.Second))
	if err != nil || len(done) != 1 || done[0].Status != StatusExpired || done[0].ExpiredAt.IsZero() ||
		done[0].Counts != (Counts{Total: 4, Completed: 1, Failed: 3}) {
		t.Fatalf("Finalize after expiry = %+v, %v", done, err)
	}
	errs := outLines(t, s, done[0].ErrorFileID)
	var ids []string
	for _, e := range errs {
		if e.Error == nil || e.Error.Code != "batch_expired" || e.Response != nil {
			t.Fatalf("expired line = %+v", e)
		}
		ids = append(ids, e.CustomID)
	}
	sort.Strings(ids)
	if fmt.Sprint(ids) != "[req-1 req-2 req-3]" {
		t.Fatalf("expired lines = %v", ids)
	}
	// The line still running finds its result refused.
	if err := s.Complete(ctx, "a", ok(ls[1])); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Complete after expiry = %v", err)
	}
	if out := outLines(t, s, done[0].OutputFileID); len(out) != 1 || out[0].CustomID != "req-0" {
		t.Fatalf("output = %+v", out)
	}
}
