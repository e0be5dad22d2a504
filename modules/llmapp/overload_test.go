package llmapp

import (
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/backends/pool"
)

func TestOverloadCaddyfile(t *testing.T) {
	tests := []struct {
		name     string
		model    string
		queue    QueueConfig
		engine   []int
		fair     bool
		wantOpts pool.Options
		wantErr  string
	}{
		{name: "defaults", model: "", wantOpts: pool.Options{}},
		{name: "reserve, shed, shed_kv", model: "queue {\nreserve 2\nshed off\nshed_kv 0.8\n}",
			queue: QueueConfig{Reserve: 2, Shed: "off", ShedKV: 0.8}, wantOpts: pool.Options{Reserve: 2, NoShed: true, ShedKV: 0.8}},
		{name: "shed on", model: "queue {\nshed on\n}", queue: QueueConfig{Shed: "on"}},
		{name: "engine_priority on", model: "engine_priority on", engine: []int{-1, 0, 1}},
		{name: "engine_priority numbers", model: "engine_priority -10 0 5", engine: []int{-10, 0, 5}},
		{name: "engine_priority off", model: "engine_priority off"},
		{name: "engine_priority class", model: "engine_priority class", engine: []int{-1, 0, 1}},
		{name: "engine_priority fair", model: "engine_priority fair", engine: []int{-1, 0, 1}, fair: true},
		{name: "engine_priority fair numbers", model: "engine_priority fair -2 0 3", engine: []int{-2, 0, 3}, fair: true},
		{name: "engine_priority fair two numbers", model: "engine_priority fair 1 2", wantErr: "three whole numbers"},
		{name: "engine_priority fair a word", model: "engine_priority fair a b c", wantErr: `"a" is not a whole number`},
		{name: "reserve negative", model: "queue {\nreserve -1\n}", wantErr: "want a whole number of slots"},
		{name: "shed maybe", model: "queue {\nshed maybe\n}", wantErr: "want on or off"},
		{name: "shed_kv above 1", model: "queue {\nshed_kv 1.5\n}", wantErr: "want a share in (0, 1]"},
		{name: "engine_priority two numbers", model: "engine_priority 1 2", wantErr: "three whole numbers"},
		{name: "engine_priority not a number", model: "engine_priority a b c", wantErr: `"a" is not a whole number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := new(App)
			err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llmedge {\nmodel qwen {\nstatic http://127.0.0.1:1\n" + tt.model + "\n}\n}"))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			mc := a.Models[0]
			if err := mc.validate(); err != nil {
				t.Fatalf("validate: %v", err)
			}
			if !slices.Equal(mc.EnginePriority, tt.engine) || mc.EngineFair != tt.fair {
				t.Errorf("engine_priority %v fair %v, want %v %v", mc.EnginePriority, mc.EngineFair, tt.engine, tt.fair)
			}
			var got QueueConfig
			if mc.Queue != nil {
				got = *mc.Queue
			}
			if got != tt.queue {
				t.Errorf("queue %+v, want %+v", got, tt.queue)
			}
			var o pool.Options
			mc.Queue.shedOptions(&o)
			if o.Reserve != tt.wantOpts.Reserve || o.NoShed != tt.wantOpts.NoShed || o.ShedKV != tt.wantOpts.ShedKV {
				t.Errorf("pool options %+v, want %+v", o, tt.wantOpts)
			}
		})
	}
}

func TestOverloadValidate(t *testing.T) {
	for _, tc := range []struct {
		mc   ModelConfig
		want string
	}{
		{ModelConfig{Name: "m", Queue: &QueueConfig{Shed: "maybe"}}, "want on or off"},
		{ModelConfig{Name: "m", Queue: &QueueConfig{Reserve: -2}}, "reserve"},
		{ModelConfig{Name: "m", Queue: &QueueConfig{ShedKV: 2}}, "shed_kv"},
		{ModelConfig{Name: "m", EnginePriority: []int{1}}, "want 3 numbers"},
	} {
		if err := tc.mc.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error containing %q", tc.mc, err, tc.want)
		}
	}
}

func TestUserPriorityCaddyfile(t *testing.T) {
	a := new(App)
	if err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llmedge {\nuser batch $2a$10$x qwen {\npriority sheddable\n}\n}")); err != nil {
		t.Fatal(err)
	}
	if a.Users[0].Priority != "sheddable" {
		t.Errorf("priority %q", a.Users[0].Priority)
	}
	err := new(App).UnmarshalCaddyfile(caddyfile.NewTestDispenser("llmedge {\nuser batch $2a$10$x qwen {\npriority high\n}\n}"))
	if err == nil || !strings.Contains(err.Error(), "want critical, standard or sheddable") {
		t.Errorf("unknown class: %v", err)
	}
}

func TestTierPriority(t *testing.T) {
	a := new(App)
	if err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llmedge {\ntier gold {\nrpm 10\npriority critical\nweight 2\n}\ntier bulk {\npriority sheddable\n}\ntier plain {\nrpm 5\n}\n}")); err != nil {
		t.Fatal(err)
	}
	if a.Tiers["gold"].Priority != "critical" || a.Tiers["gold"].Weight != 2 || a.Tiers["gold"].RPM != 10 {
		t.Fatalf("gold %+v", a.Tiers["gold"])
	}
	users, err := auth.NewUsers([]auth.User{{Name: "local", PasswordHash: "$2a$04$//lmmdYlz3BXiUhDo5P6lOOcjwIbLtvpOSupFwNCLW6iykENt/Ht.", Priority: "sheddable"}})
	if err != nil {
		t.Fatal(err)
	}
	of := priorityOf(users, a.tierPriorities())
	for _, tc := range []struct {
		p    *auth.Principal
		want api.Priority
	}{
		{&auth.Principal{Subject: "x", Provider: "https://idp", Tier: "gold"}, api.PriorityCritical},
		{&auth.Principal{Subject: "x", Provider: "mtls", Tier: "bulk"}, api.PrioritySheddable},
		{&auth.Principal{Subject: "x", Provider: "https://idp", Tier: "plain"}, api.PriorityStandard},
		{&auth.Principal{Subject: "x", Provider: "https://idp"}, api.PriorityStandard},
		{&auth.Principal{Subject: "local"}, api.PrioritySheddable},
	} {
		if got := of(tc.p); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.p, got, tc.want)
		}
	}
	err = new(App).UnmarshalCaddyfile(caddyfile.NewTestDispenser("llmedge {\ntier gold {\npriority top\n}\n}"))
	if err == nil || !strings.Contains(err.Error(), "want critical, standard or sheddable") {
		t.Errorf("an unknown class: %v", err)
	}
}
