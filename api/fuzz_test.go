package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"unicode/utf8"
)

// FuzzParse feeds arbitrary bodies to the validator: it must never panic,
// must answer either a request that honours every limit or a 422 whose
// entries all name a field, and must be deterministic.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}],"model_type":"gemma","temperature":1.5,"stream":true,"system_message":"x"}`,
		`{"messages":[]}`, `{"messages":null}`, `[]`, `null`, `"str"`, `{"messages":[1,{"role":5}]}`,
		`{"messages":[{"role":"user","content":"\ud800"}]}`, `{"temperature":1e400}`, `{"stream":"yes"}`,
		`{"messages":[{"role":"user","content":"a"}],"model_type":"qwen","model_type":"gemma"}`,
	} {
		f.Add([]byte(seed))
	}
	v := &Validator{Models: []string{"qwen", "gemma"}, DefaultModel: "qwen",
		Limits: Limits{MaxMessages: 4, MaxContentChars: 32, MaxBodyBytes: 4096}}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := v.Parse(body)
		req2, err2 := v.Parse(body)
		if (err == nil) != (err2 == nil) {
			t.Fatal("not deterministic")
		}
		if err != nil {
			if err.Status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d", err.Status)
			}
			fes, ok := err.Detail.([]FieldError)
			if !ok || len(fes) == 0 {
				t.Fatalf("detail %#v", err.Detail)
			}
			for _, fe := range fes {
				if fe.Type == "" || fe.Msg == "" || len(fe.Loc) == 0 || fe.Loc[0] != "body" {
					t.Fatalf("bad entry %+v", fe)
				}
			}
			if _, jerr := json.Marshal(err); jerr != nil {
				t.Fatalf("error does not render: %v", jerr)
			}
			return
		}
		if len(req.Messages) == 0 || len(req.Messages) > 4 || req.Temperature < 0 || req.Temperature > 2 ||
			(req.ModelType != "qwen" && req.ModelType != "gemma") || req2.ModelType != req.ModelType {
			t.Fatalf("accepted %+v", req)
		}
		for _, m := range req.Messages {
			if !slices.Contains(roles, m.Role) || m.Quoted == nil || utf8.RuneCountInString(m.Text()) > 32 {
				t.Fatalf("accepted message %+v", m)
			}
		}
	})
}
