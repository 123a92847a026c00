package app

import _ "embed"

// OpenAPI is the OpenAPI 3 description of every route; a test keeps it and
// the router in step.
//
//go:embed openapi.json
var OpenAPI []byte
