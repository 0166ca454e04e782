package console

import (
	_ "embed"
	"net/http"
)

// openapiDoc describes the API; TestOpenAPIMatchesRoutes holds it to the
// routes table (every path and method in both).
//
//go:embed openapi.json
var openapiDoc []byte

func (c *Console) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openapiDoc)
}
