package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// runDoors runs the doors scenario on the proxies setUp started: for
// each size and door, stock Caddy and llmedge closed loop (Rounds times),
// then open loop, the pair's order alternating from cell to cell and
// round to round so that neither proxy always runs right after the
// machine's busiest moment.
func (r *runner) runDoors(ctx context.Context) error {
	dc := r.cfg.Doors
	if !dc.Enabled() {
		return nil
	}
	if err := r.configureSim(ctx, scenario{Kind: "max"}); err != nil {
		return err
	}
	for i, cell := range dc.cells() {
		caddy, llmedge, err := r.doorTargets(cell)
		if err != nil {
			return err
		}
		name := cell.door.Name + "-" + sizeName(cell.size)
		closed := scenario{Name: name + "-max", Kind: "max", Workers: dc.Workers, Warmup: dc.Warmup, Duration: dc.Duration, PreciseCPU: true}
		open := scenario{Name: name + "-rate", Kind: "rate", Rate: dc.rate(cell.size), Warmup: dc.Warmup, Duration: dc.Duration, PreciseCPU: true}
		for round := range dc.rounds() {
			var err error
			if dc.Together {
				err = r.runDoorPairTogether(ctx, cell, closed, round, caddy, llmedge)
			} else {
				err = r.runDoorPair(ctx, cell, closed, round, (i+round)%2 == 1, caddy, llmedge)
			}
			if err != nil {
				return err
			}
		}
		if err := r.runDoorPair(ctx, cell, open, 0, i%2 == 1, caddy, llmedge); err != nil {
			return err
		}
	}
	for _, px := range []*proxy{r.caddy, r.llmedge} {
		if px.exited() {
			return fmt.Errorf("%s exited during the doors scenario:\n%s", px.name, px.log.tail(30))
		}
	}
	return nil
}

// runDoorPair runs s on both targets, llmedge first when swap is set,
// and records the runs as round's.
func (r *runner) runDoorPair(ctx context.Context, cell doorCell, s scenario, round int, swap bool, caddy, llmedge *Target) error {
	pair := []*Target{caddy, llmedge}
	if swap {
		pair = []*Target{llmedge, caddy}
	}
	for _, t := range pair {
		if err := ctx.Err(); err != nil {
			return err
		}
		res, err := r.runOne(ctx, s, t)
		if err != nil {
			return fmt.Errorf("%s on %s: %w", s.Name, t.Name, err)
		}
		r.recordDoorRun(cell, s, round, t, res, "")
	}
	return nil
}

// recordDoorRun logs and records res, the run of s on t as round's, and
// lets the run's closed connections settle before the next. note follows
// the log line.
func (r *runner) recordDoorRun(cell doorCell, s scenario, round int, t *Target, res Result, note string) {
	r.log("%-22s %-8s %s%s", s.Name, t.Name, res.brief(), note)
	r.report.Doors = append(r.report.Doors, DoorRun{Door: cell.door.Name, Size: cell.size, Round: round, Result: res})
	time.Sleep(300 * time.Millisecond)
}

// runDoorPairTogether runs s on both targets at the same time, each with
// half of s's workers, and records the runs as round's.
func (r *runner) runDoorPairTogether(ctx context.Context, cell doorCell, s scenario, round int, caddy, llmedge *Target) error {
	s.Workers /= 2
	pair := []*Target{caddy, llmedge}
	var results [2]Result
	errs := make(chan error, len(pair))
	for k, t := range pair {
		go func() {
			res, err := r.runOne(ctx, s, t)
			if err != nil {
				err = fmt.Errorf("%s on %s (together): %w", s.Name, t.Name, err)
			}
			results[k] = res
			errs <- err
		}()
	}
	var err error
	for range pair {
		err = errors.Join(err, <-errs)
	}
	if err != nil {
		return err
	}
	for k, t := range pair {
		r.recordDoorRun(cell, s, round, t, results[k], " (together)")
	}
	return nil
}

// doorTargets are cell's two targets: stock Caddy with the door's
// counterpart on the replica, llmedge with the door itself, each sending
// a body of the cell's size.
func (r *runner) doorTargets(cell doorCell) (caddy, llmedge *Target, err error) {
	caddyDoor := cell.door.Name
	if caddyDoor == "native" {
		caddyDoor = "chat" // what the native door's request is on the replica
	}
	cb, err := doorBody(caddyDoor, benchModel, cell.size)
	if err != nil {
		return nil, nil, err
	}
	lb, err := doorBody(cell.door.Name, benchModel, cell.size)
	if err != nil {
		return nil, nil, err
	}
	hdr := http.Header{"Content-Type": {"application/json"}, "Anthropic-Version": {"2023-06-01"}}
	caddy = r.caddy.target(PathCaddy, cell.door.CaddyPath)
	caddy.Header, caddy.Body = hdr, cb
	llmedge = r.llmedge.target(PathLLMEdge, cell.door.Path)
	llmedge.Header = hdr.Clone()
	llmedge.Header.Set("Authorization", "Bearer "+r.token)
	llmedge.Body = lb
	return caddy, llmedge, nil
}
