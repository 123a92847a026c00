# The default redaction policy. flightrec evaluates data.flightrec.redact.plan
# once per recording, with the recording's metadata and app map as input:
#
#   input.recording: {project, flow, labels, executor, versions}
#   input.app_map:   {masked_selectors: [...], mask_text_selectors: [...]}
#
# Every list is a partial set: a user policy in the same package (--policy DIR)
# adds to it and can never take an entry away, so adding masking cannot unmask
# a default. Scalars have defaults a user policy may override.
package flightrec.redact

drop_headers contains h if some h in {
	"authorization", "proxy-authorization", "cookie", "set-cookie",
	"x-api-key", "x-auth-token", "x-csrf-token", "x-csrftoken", "x-xsrf-token",
	"x-client-data", "x-amz-security-token",
}

drop_cookies contains "*"

drop_params contains p if some p in {
	"password", "passwd", "pwd", "token", "access_token", "id_token", "refresh_token",
	"code", "code_verifier", "client_secret", "secret", "api_key", "apikey", "auth",
	"session", "sig", "signature", "x-amz-signature", "x-amz-credential",
	"x-amz-security-token", "samlrequest", "samlresponse",
}

secret_keys contains k if some k in {
	"password", "passwd", "pwd", "secret", "token", "accesstoken", "refreshtoken",
	"idtoken", "apikey", "clientsecret", "cardnumber", "cvv", "cvc", "pin", "ssn",
	"otp", "authorization", "privatekey",
}

mask_input_types contains t if some t in {"password", "hidden"}

mask_autocomplete contains a if some a in {"cc-*", "current-password", "new-password", "one-time-code"}

mask_name_patterns contains `card|cc-?(num|number|csc|cvc|exp)|cvv|cvc|pass(word|wd)?|pin|otp|ssn|secret`

mask_selectors contains s if some s in object.get(input, ["app_map", "masked_selectors"], [])

mask_text_selectors contains s if some s in object.get(input, ["app_map", "mask_text_selectors"], [])

detectors contains d if some d in {"jwt", "pem", "aws", "github", "slack", "generic", "card"}

drop_body_mimes contains "application/octet-stream"

default entropy_threshold := 3.5

default pseudonymize := false

default drop_unmasked_frames := true

# A downloaded file's bytes are kept as a blob only when this is true;
# by default a download is kept as its name, size, type and sha256.
default keep_downloads := false

plan := {
	"drop_headers": drop_headers,
	"drop_cookies": drop_cookies,
	"drop_params": drop_params,
	"secret_keys": secret_keys,
	"mask_input_types": mask_input_types,
	"mask_autocomplete": mask_autocomplete,
	"mask_name_patterns": mask_name_patterns,
	"mask_selectors": mask_selectors,
	"mask_text_selectors": mask_text_selectors,
	"detectors": detectors,
	"entropy_threshold": entropy_threshold,
	"drop_body_mimes": drop_body_mimes,
	"pseudonymize": pseudonymize,
	"drop_unmasked_frames": drop_unmasked_frames,
	"keep_downloads": keep_downloads,
}
