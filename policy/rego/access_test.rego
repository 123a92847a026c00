package flightrec.access_test

import data.flightrec.access

reader_p := {"id": "t1", "project": "p", "scopes": ["read"]}

test_read_own_project if {
	access.decision.allow with input as {"method": "GET", "route": "/v1/recordings/{id}/steps", "project": "p", "token": reader_p}
}

test_read_other_project_is_refused_as_other_project if {
	d := access.decision with input as {"method": "GET", "route": "/v1/recordings/{id}", "project": "q", "token": reader_p}
	not d.allow
	d.reason == "other project"
}

test_missing_scope_names_it if {
	d := access.decision with input as {"method": "POST", "route": "/v1/recordings/{id}/events", "project": "p", "token": reader_p}
	not d.allow
	d.need == "ingest"
	d.reason == "missing scope"
}

test_admin_routes_need_every_project if {
	admin_p := {"id": "t2", "project": "p", "scopes": ["admin"]}
	not access.decision.allow with input as {"method": "GET", "route": "/v1/blobs/{cid}", "project": "", "token": admin_p}
	access.decision.allow with input as {"method": "GET", "route": "/v1/blobs/{cid}", "project": "", "token": object.union(admin_p, {"project": "*"})}
}

test_unknown_route_is_refused if {
	d := access.decision with input as {"method": "PUT", "route": "/v1/anything", "project": "p", "token": {"id": "t", "project": "*", "scopes": ["read", "ingest", "pin", "admin"]}}
	not d.allow
}
