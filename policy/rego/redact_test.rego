package flightrec.redact_test

import data.flightrec.redact

test_password_inputs_are_masked if {
	"password" in redact.plan.mask_input_types
}

test_session_headers_are_dropped if {
	every h in {"authorization", "cookie", "set-cookie"} {
		h in redact.plan.drop_headers
	}
}

test_app_map_selectors_are_masked if {
	p := redact.plan with input as {"app_map": {"masked_selectors": ["#gift-code"], "mask_text_selectors": [".balance"]}}
	"#gift-code" in p.mask_selectors
	".balance" in p.mask_text_selectors
}

test_no_app_map_masks_no_selectors if {
	count(redact.plan.mask_selectors) == 0
}

test_all_detectors_on if {
	count(redact.plan.detectors) == 7
}

test_frames_fail_closed_by_default if {
	redact.plan.drop_unmasked_frames == true
	redact.plan.pseudonymize == false
}
