package flightrec.retention_test

import data.flightrec.retention

test_passing_runs_keep_14_days if {
	retention.class == {"name": "passing", "days": 14} with input as {"recording": {"verdict": "pass"}}
}

test_failing_runs_keep_90_days if {
	every v in {"fail", "flaky", "blocked", "aborted"} {
		retention.class.days == 90 with input as {"recording": {"verdict": v}}
	}
}

test_not_run_is_kept_as_passing if {
	retention.class.name == "passing" with input as {"recording": {"verdict": "not_run"}}
}

test_damaged_is_kept_as_failing if {
	retention.class == {"name": "failing", "days": 90} with input as {"recording": {"damaged": true}}
	retention.class == {"name": "failing", "days": 90} with input as {"recording": {"verdict": "pass", "damaged": true}}
	retention.class == {"name": "failing", "days": 90} with input as {"recording": {"verdict": "fail", "damaged": true}}
}
