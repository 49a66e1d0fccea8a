package oauth

// Authorization server metadata (RFC 8414), so that a client configures
// itself from the issuer alone (openid-client's discovery(), for one).

import (
	"encoding/json"
	"net/http"
)

// MetadataPath is where the metadata of an issuer without a path is
// served (RFC 8414 §3).
const MetadataPath = "/.well-known/oauth-authorization-server"

// Metadata is the hub's authorization server metadata.
type Metadata struct {
	Issuer                                 string   `json:"issuer"`
	AuthorizationEndpoint                  string   `json:"authorization_endpoint"`
	TokenEndpoint                          string   `json:"token_endpoint"`
	RevocationEndpoint                     string   `json:"revocation_endpoint"`
	ResponseTypesSupported                 []string `json:"response_types_supported"`
	ResponseModesSupported                 []string `json:"response_modes_supported"`
	GrantTypesSupported                    []string `json:"grant_types_supported"`
	TokenEndpointAuthMethodsSupported      []string `json:"token_endpoint_auth_methods_supported"`
	RevocationEndpointAuthMethodsSupported []string `json:"revocation_endpoint_auth_methods_supported"`
	CodeChallengeMethodsSupported          []string `json:"code_challenge_methods_supported"`
	ScopesSupported                        []string `json:"scopes_supported"`
	// Every authorization response carries iss (RFC 9207).
	AuthorizationResponseIssParameterSupported bool `json:"authorization_response_iss_parameter_supported"`
}

// Metadata describes this server, with endpoints under PublicURL.
func (s *Server) Metadata() Metadata {
	clientAuth := []string{"client_secret_basic", "client_secret_post"}
	return Metadata{
		Issuer:                                     s.opts.PublicURL,
		AuthorizationEndpoint:                      s.opts.PublicURL + "/oauth/authorize",
		TokenEndpoint:                              s.opts.PublicURL + "/oauth/token",
		RevocationEndpoint:                         s.opts.PublicURL + "/oauth/revoke",
		ResponseTypesSupported:                     []string{"code"},
		ResponseModesSupported:                     []string{"query"},
		GrantTypesSupported:                        []string{"authorization_code", "refresh_token"},
		TokenEndpointAuthMethodsSupported:          clientAuth,
		RevocationEndpointAuthMethodsSupported:     clientAuth,
		CodeChallengeMethodsSupported:              []string{"S256"},
		ScopesSupported:                            []string{"app"},
		AuthorizationResponseIssParameterSupported: true,
	}
}

func (s *Server) handleMetadata(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	// Public, and the same for everyone; browser-based clients fetch it
	// from another origin (RFC 8414 §3).
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Cache-Control", "max-age=300")
	json.NewEncoder(w).Encode(s.Metadata())
}
