// Package llmedge is an edge gateway for self-hosted LLM inference, built
// as Caddy modules. Importing it registers every llmedge module; this is
// the package `xcaddy build --with github.com/llmedge/llmedge` pulls in.
package llmedge

import _ "github.com/llmedge/llmedge/modules"
