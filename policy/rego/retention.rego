# flightrec's default retention policy. The sweeper asks
# data.flightrec.retention.class for every finished recording, with input
# {"recording": {project, flow, labels, executor, verdict, damaged}}, and gets
# {"name": …, "days": N}: the recording expires N days after it finished.
# A policy directory may replace this package (every module in package
# flightrec.retention there replaces this file).
package flightrec.retention

# Failures are evidence: kept longer than passing runs. An aborted
# recording (its executor abandoned it) is kept like a failure: why it was
# abandoned is what someone will look for.
failing := {"fail", "flaky", "blocked", "aborted"}

default class := {"name": "passing", "days": 14}

class := {"name": "failing", "days": 90} if input.recording.verdict in failing

# Damaged evidence (a repaired recording, sealed with declared gaps and no
# verdict, or one whose manifest cannot be read) is kept like a failure:
# the damage is itself something someone will look into.
class := {"name": "failing", "days": 90} if input.recording.damaged
