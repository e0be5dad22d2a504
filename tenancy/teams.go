package tenancy

import (
	"slices"

	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/limits"
)

// Team is a group of users and API keys whose models, limits and budgets
// cap its members': a member's request must pass its own limits and its
// team's, and may use only models both allow.
type Team struct {
	// Models the members may use; nil leaves the members' own scopes as
	// they are.
	Models []string
	// Limit is the team's, all its members together: rpm, tpm,
	// concurrency and budgets.
	Limit limits.Limit
}

// UserTeams looks up a local user's team; auth.Users implements it.
type UserTeams interface {
	Team(user string) string
}

// Team names p's team: an API key's own, else its user's (set on the
// principal when the key is verified), else, for an access token of a
// local user, the user's team now (so a change of the users file applies
// to tokens already issued). Outside identities have none. It allocates
// nothing.
func (s *Service) Team(p *auth.Principal) string {
	if p == nil {
		return ""
	}
	if p.Team != "" || p.KeyID != "" || p.Provider != "" {
		return p.Team
	}
	if ut := s.userTeams.Load(); ut != nil {
		return (*ut).Team(p.Subject)
	}
	return ""
}

// TeamAllows reports whether team may use model; known is false for a
// team that is not configured (its members are refused: a team's caps are
// not lifted by a typo).
func (s *Service) TeamAllows(team, model string) (allowed, known bool) {
	t, ok := s.cfg.Teams[team]
	if !ok {
		return false, false
	}
	return t.Models == nil || slices.Contains(t.Models, model), true
}

// Teams are the configured teams' names, sorted.
func (s *Service) Teams() []string {
	names := make([]string, 0, len(s.cfg.Teams))
	for n := range s.cfg.Teams {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
