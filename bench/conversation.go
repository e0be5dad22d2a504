package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/simulator"
)

// turnTimeout bounds one turn, waiting for the previous answer included:
// past the gateway's 60 s first-token timeout, so that the gateway's own
// verdict is what a stuck request reports.
const turnTimeout = 2 * time.Minute

// convResult is what the client saw of the measured turns of a run.
type convResult struct {
	Sent        int // measured turns
	OK          int
	Errors      int
	ErrorSample string
	// Held counts measured turns sent late because the previous answer of
	// their conversation was still coming when they were due.
	Held int
	TTFT []time.Duration // of the successful measured turns, from their send
	// Floor is, for the same turns, the least time to first token any
	// router could have given them (simulator.Floor): the workload's own
	// share of TTFT.
	Floor []time.Duration
}

// chatState is one conversation's messages as the client holds them.
type chatState struct {
	msgs []api.Message
	// done is closed when the conversation's latest turn has ended, with
	// its answer appended to msgs.
	done chan struct{}
}

// endpoint is where a turn is sent: a gateway instance and a client of it.
type endpoint struct {
	c *http.Client
	t *Target
}

// runWorkload plays w against model through the endpoints: each turn is
// sent when due, or as soon as the previous turn of its conversation has
// its answer, streamed, and timed to its first token; pick chooses each
// turn's endpoint, in schedule order (so that a seeded pick is
// reproducible). Turns due from warmup on are measured; win.begin is
// called at warmup, win.end once every turn ended. Each turn's prompt is
// sent to floor as it goes, for its floor.
func runWorkload(ctx context.Context, eps []endpoint, pick func() int, model string, w *workload, floor *simulator.Floor, warmup time.Duration, replyTokens int, win window) convResult {
	var (
		mu  sync.Mutex
		res convResult
		wg  sync.WaitGroup
	)
	chats := make([]*chatState, w.Convs)
	start := time.Now()
	begun := false
	for _, tr := range w.Turns {
		if ctx.Err() != nil {
			break
		}
		time.Sleep(time.Until(start.Add(tr.At)))
		measured := tr.At >= warmup
		if measured && !begun {
			begun = true
			win.begin()
		}
		ch := chats[tr.Conv]
		if ch == nil {
			ch = &chatState{msgs: append([]api.Message{{Role: "system", Content: w.System[tr.Tenant]}}, tr.Prior...)}
			chats[tr.Conv] = ch
		}
		prev, done := ch.done, make(chan struct{})
		ch.done = done
		ep := eps[pick()]
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done)
			held := false
			if prev != nil {
				select {
				case <-prev:
				default:
					held = true
					<-prev
				}
			}
			// The previous turn has finished with ch.msgs: the channel
			// hands them over.
			msgs := append(slices.Clip(ch.msgs), api.Message{Role: "user", Content: tr.User})
			// The request ID names the turn, so that the gateway's access
			// log (-routing-access-log) can be read against the workload.
			id := fmt.Sprintf("t%d-c%d-n%d", tr.Tenant, tr.Conv, tr.N)
			least := floor.Send(msgs)
			answer, ttft, err := chatTurn(ctx, ep.c, ep.t, model, id, tr.Tenant, msgs, replyTokens)
			if err != nil {
				// Keep the conversation going with a stand-in answer; the
				// error is counted below.
				answer = "(no answer)"
			}
			ch.msgs = append(msgs, api.Message{Role: "assistant", Content: answer})
			if !measured {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			res.Sent++
			if held {
				res.Held++
			}
			if err != nil {
				res.Errors++
				if res.ErrorSample == "" {
					res.ErrorSample = fmt.Sprintf("conversation %d turn %d: %v", tr.Conv, tr.N, err)
				}
				return
			}
			res.OK++
			res.TTFT = append(res.TTFT, ttft)
			res.Floor = append(res.Floor, least)
		}()
	}
	if !begun {
		win.begin()
	}
	wg.Wait()
	win.end()
	return res
}

// chatRequest is the public API's body, streamed.
type chatRequest struct {
	Messages  []api.Message `json:"messages"`
	ModelType string        `json:"model_type"`
	Stream    bool          `json:"stream"`
}

// chatTurn sends one streamed turn of tenant and reads it to the end: the
// time to its first content event, and the answer from the final done
// event.
func chatTurn(ctx context.Context, c *http.Client, t *Target, model, id string, tenant int, msgs []api.Message, replyTokens int) (string, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, turnTimeout)
	defer cancel()
	body, err := json.Marshal(chatRequest{Messages: msgs, ModelType: model, Stream: true})
	if err != nil {
		return "", 0, err
	}
	req, err := t.request(ctx, body)
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("X-Request-ID", id)
	if n := len(t.TenantAuth); n > 0 {
		req.Header.Set("Authorization", t.TenantAuth[tenant%n])
	}
	sent := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return "", 0, fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	return readAnswer(resp.Body, sent, replyTokens)
}

// readAnswer reads one of llmedge's streams: content events, then
// `event: done` whose data is the complete answer. It returns the answer's
// text and the time from sent to the first content event.
func readAnswer(body io.Reader, sent time.Time, replyTokens int) (string, time.Duration, error) {
	var (
		sse    sseTokens
		ttft   time.Duration
		tokens int
		done   bool
	)
	// The done event repeats the whole answer on one line: the reader
	// grows to hold it.
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 16<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if done {
			data, ok := bytes.CutPrefix(line, dataPrefix)
			if !ok {
				continue
			}
			var a struct {
				Content *string `json:"content"`
			}
			if err := json.Unmarshal(data, &a); err != nil || a.Content == nil {
				return "", ttft, fmt.Errorf("done event without an answer: %.200s", data)
			}
			if tokens != replyTokens {
				return "", ttft, fmt.Errorf("stream done after %d tokens, want %d", tokens, replyTokens)
			}
			return *a.Content, ttft, nil
		}
		switch sse.line(line) {
		case sseToken:
			if tokens++; tokens == 1 {
				ttft = time.Since(sent)
			}
		case sseDone:
			done = true
		case sseError:
			return "", ttft, fmt.Errorf("error event after %d tokens", tokens)
		}
	}
	err := sc.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return "", ttft, errors.Join(fmt.Errorf("stream ended after %d tokens", tokens), err)
}
