package llmapp

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/limits"
)

func TestTenancyCaddyfileErrors(t *testing.T) {
	tests := []struct {
		name, input, want string
	}{
		{"redis without URL", "llmedge {\nredis\n}", "want a URL"},
		{"redis http URL", "llmedge {\nredis http://x:6379\n}", "redis:// or rediss://"},
		{"redis unknown option", "llmedge {\nredis redis://x:6379 {\ndb 3\n}\n}", `unrecognized redis option "db"`},
		{"sentinel without addresses", "llmedge {\nredis sentinel mymaster\n}", "want the primary's name and at least one"},
		{"sentinel bad address", "llmedge {\nredis sentinel mymaster s1\n}", `"s1": want host:port`},
		{"cluster without nodes", "llmedge {\nredis cluster\n}", "want at least one node"},
		{"sentinel_password on a URL", "llmedge {\nredis redis://x:6379 {\nsentinel_password p\n}\n}", "only with redis sentinel"},
		{"tls on a URL", "llmedge {\nredis redis://x:6379 {\ntls\n}\n}", "rediss://"},
		{"failure mode", "llmedge {\non_redis_failure maybe\n}", "want open or closed"},
		{"share_routing value", "llmedge {\nshare_routing yes\n}", "share_routing: want on or off"},
		{"share_routing without value", "llmedge {\nshare_routing\n}", "wrong argument count"},
		{"zero rpm", "llmedge {\nlimits {\nrpm 0\n}\n}", "want a whole number ≥ 1 or off"},
		{"negative tpm", "llmedge {\nlimits {\ntpm -5\n}\n}", "want a whole number ≥ 1 or off"},
		{"unknown limit", "llmedge {\nlimits {\nrph 5\n}\n}", `unrecognized option "rph"`},
		{"limits with args", "llmedge {\nlimits 5\n}", "want a block"},
		{"limits twice", "llmedge {\nlimits {\nrpm 1\n}\nlimits {\nrpm 2\n}\n}", "given twice"},
		{"user block option", "llmedge {\nuser a $2a$10$x qwen {\nquota 5\n}\n}", `unrecognized option "quota" for user "a"`},
		{"model limits", "llmedge {\nmodel qwen {\nlimits {\nconcurrency none\n}\n}\n}", "concurrency: want a whole number"},
		{"queue order", "llmedge {\nmodel qwen {\nqueue {\norder lifo\n}\n}\n}", "want fair or fifo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := new(App).UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.input))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestTenancyCaddyfile(t *testing.T) {
	a := new(App)
	err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`llmedge {
		limits {
			rpm 60
			concurrency off
			api_key {
				tpm 5000
			}
		}
		user bob $2a$10$x {
			limits {
				rpm 5
			}
		}
		user carol $2a$10$x qwen
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.RateLimits.Limit, limits.Limit{RPM: 60, Concurrency: limits.Off}) || !reflect.DeepEqual(*a.RateLimits.APIKey, limits.Limit{TPM: 5000}) {
		t.Errorf("limits %+v api_key %+v", a.RateLimits.Limit, a.RateLimits.APIKey)
	}
	if len(a.Users) != 2 || a.Users[0].Limits == nil || a.Users[0].Limits.RPM != 5 || a.Users[1].Limits != nil ||
		!slices.Equal(a.Users[1].Models, []string{"qwen"}) {
		t.Errorf("users %+v", a.Users)
	}
}

func TestTeamsAndBudgetsCaddyfile(t *testing.T) {
	a := new(App)
	err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`llmedge {
		limits {
			rpm 60
			budget tokens 100000 per day
			budget_warning 90%
			api_key {
				budget cost 5 per month
			}
		}
		team research {
			models qwen
			tpm 50000
			budget tokens 1000000 per month
			budget cost 20.5 month
		}
		team ops
		user bob $2a$10$x qwen {
			team research
			limits {
				budget tokens off per day
			}
		}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	rl := a.RateLimits
	if rl.RPM != 60 || !reflect.DeepEqual(rl.Budgets, []limits.Budget{{Unit: limits.UnitTokens, Amount: 100000, Per: limits.PerDay}}) ||
		rl.BudgetWarning != 0.9 || !reflect.DeepEqual(rl.APIKey.Budgets, []limits.Budget{{Unit: limits.UnitCost, Amount: 5, Per: limits.PerMonth}}) {
		t.Errorf("limits %+v api_key %+v", rl, rl.APIKey)
	}
	r := a.Teams["research"]
	if r == nil || !slices.Equal(r.Models, []string{"qwen"}) || r.Limits.TPM != 50000 || len(r.Limits.Budgets) != 2 ||
		r.Limits.Budgets[1] != (limits.Budget{Unit: limits.UnitCost, Amount: 20.5, Per: limits.PerMonth}) {
		t.Errorf("team research %+v", r)
	}
	if o := a.Teams["ops"]; o == nil || o.Models != nil || o.Limits.Enforced() {
		t.Errorf("team ops %+v", o)
	}
	if u := a.Users[0]; u.Team != "research" || u.Limits == nil || u.Limits.Budgets[0].Amount != limits.Off {
		t.Errorf("user %+v", u)
	}
	if !a.budgetsConfigured() || !a.teamsInUse() || !a.limitsConfigured() {
		t.Error("budgets or teams not seen as configured")
	}
	// The user's "off" lifts the default's daily token budget.
	if got := a.Users[0].Limits.Over(rl.Limit); len(got.Budgets) != 0 {
		t.Errorf("bob's budgets %+v, want none", got.Budgets)
	}
}

func TestTeamsAndBudgetsCaddyfileErrors(t *testing.T) {
	tests := []struct {
		name, input, want string
	}{
		{"team without name", "llmedge {\nteam\n}", "team: want team <name>"},
		{"team twice", "llmedge {\nteam a\nteam a\n}", "defined twice"},
		{"team name", "llmedge {\nteam a/b\n}", "may only hold"},
		{"team models empty", "llmedge {\nteam a {\nmodels\n}\n}", "want at least one model"},
		{"team unknown option", "llmedge {\nteam a {\nquota 5\n}\n}", `unrecognized option "quota"`},
		{"budget unit", "llmedge {\nteam a {\nbudget dollars 5 per day\n}\n}", "want tokens or cost"},
		{"budget period", "llmedge {\nlimits {\nbudget tokens 5 per week\n}\n}", "want day or month"},
		{"budget amount", "llmedge {\nlimits {\nbudget tokens -5 per day\n}\n}", "want a number above 0"},
		{"budget twice", "llmedge {\nlimits {\nbudget tokens 5 per day\nbudget tokens 6 per day\n}\n}", "given twice"},
		{"budget on a model", "llmedge {\nmodel qwen {\nlimits {\nbudget tokens 5 per day\n}\n}\n}", `unrecognized option "budget"`},
		{"budget warning", "llmedge {\nlimits {\nbudget_warning 120%\n}\n}", "budget_warning"},
		{"user team name", "llmedge {\nuser a $2a$10$x {\nteam a:b\n}\n}", "may only hold"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := new(App).UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.input))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestRedisDeploymentsCaddyfile(t *testing.T) {
	tests := []struct {
		name, input string
		want        RedisConfig
	}{
		{"sentinel", "llmedge {\nredis sentinel mymaster 10.0.0.1:26379 10.0.0.2:26379 {\nsentinel_password {env.S}\npassword p\ntls\n}\n}",
			RedisConfig{Sentinel: &RedisSentinel{Master: "mymaster", Addrs: []string{"10.0.0.1:26379", "10.0.0.2:26379"}, Password: "{env.S}"},
				Password: "p", TLS: true}},
		{"cluster", "llmedge {\nredis cluster a:7000 b:7000 c:7000\n}", RedisConfig{Cluster: []string{"a:7000", "b:7000", "c:7000"}}},
		{"url", "llmedge {\nredis redis://x:6379\n}", RedisConfig{URL: "redis://x:6379"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := new(App)
			if err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.input)); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*a.Redis, tt.want) {
				t.Errorf("redis %+v, want %+v", *a.Redis, tt.want)
			}
		})
	}
}
