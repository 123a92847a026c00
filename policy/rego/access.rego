# flightrec's default access policy. The server asks data.flightrec.access.decision
# for every request to a protected route, with input:
#
#   method      "GET", "POST", …
#   route       the route pattern, e.g. "/v1/recordings/{id}/steps"
#   project     the project of the recording the request is about ("" when
#               it names none: a list without ?project=, an admin route)
#   token       {id, project ("*" for every project), scopes: [ingest, read, pin, admin, share, comment]}
#
# and gets {allow, need, reason}: need is the scope the route needs, so a
# refusal can name it. A policy directory may replace this package (every
# module in package flightrec.access there replaces this file).
package flightrec.access

# The scope each route needs. A route missing here is refused.
route_scopes := {
	"POST /v1/recordings": "ingest",
	"POST /v1/recordings/{id}/events": "ingest",
	"POST /v1/recordings/{id}/finish": "ingest",
	"POST /v1/recordings/{id}/abort": "ingest",
	"POST /v1/recordings/{id}/repair": "admin",
	"GET /v1/recordings": "read",
	"GET /v1/recordings/{id}": "read",
	"GET /v1/recordings/{id}/steps": "read",
	"GET /v1/recordings/{id}/steps/{n}": "read",
	"GET /v1/recordings/{id}/events": "read",
	"GET /v1/recordings/{id}/redaction": "read",
	"GET /v1/recordings/{id}/blobs/{cid}": "read",
	"GET /v1/recordings/{id}/search": "read",
	"GET /v1/recordings/{id}/har": "read",
	"GET /v1/recordings/{id}/rrweb": "read",
	"GET /v1/recordings/{id}/bundle": "read",
	"GET /v1/recordings/{id}/attestation": "read",
	"GET /v1/recordings/{id}/evidence": "read",
	"POST /v1/recordings/{id}/evidence": "share",
	"GET /v1/recordings/{id}/steps/{n}/dom": "read",
	"GET /v1/recordings/{id}/snapshots/{seq}": "read",
	"GET /v1/recordings/{id}/video.webm": "read",
	"GET /v1/recordings/{id}/at": "read",
	"GET /v1/search": "read",
	"GET /v1/diff": "read",
	"GET /v1/diff/group": "read",
	"POST /v1/groups": "read",
	"GET /v1/groups/{id}": "read",
	"POST /v1/recordings/{id}/pins": "pin",
	"DELETE /v1/recordings/{id}/pins/{pin}": "pin",
	"POST /v1/recordings/{id}/shares": "share",
	"GET /v1/recordings/{id}/shares": "share",
	"DELETE /v1/recordings/{id}/shares/{sid}": "share",
	"GET /v1/recordings/{id}/views": "admin",
	"GET /v1/recordings/{id}/comments": "read",
	"POST /v1/recordings/{id}/comments": "comment",
	"PATCH /v1/recordings/{id}/comments/{comment}": "comment",
	"DELETE /v1/recordings/{id}/comments/{comment}": "comment",
	"GET /v1/blobs/{cid}": "admin",
	"GET /metrics": "admin",
	"GET /v1/tokens": "admin",
	"POST /v1/tokens": "admin",
	"DELETE /v1/tokens/{id}": "admin",
	"GET /v1/recordings/{id}/retention": "read",
	"POST /v1/retention/sweep": "admin",
	"GET /v1/audit": "admin",
	"POST /v1/index/rebuild": "admin",
}

need := route_scopes[concat(" ", [input.method, input.route])]

has_scope if need in input.token.scopes

# A token for every project reaches every recording; a project's token
# reaches that project's recordings. Routes about no project (admin
# routes, a list of every project) need a token for every project.
in_project if input.token.project == "*"

in_project if {
	input.project != ""
	input.token.project == input.project
}

default decision := {"allow": false, "need": "", "reason": "no such route"}

decision := {"allow": true, "need": need, "reason": "granted"} if {
	has_scope
	in_project
}

decision := {"allow": false, "need": need, "reason": "missing scope"} if {
	need
	not has_scope
}

decision := {"allow": false, "need": need, "reason": "other project"} if {
	has_scope
	not in_project
}
