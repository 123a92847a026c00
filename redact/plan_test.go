package redact

import "github.com/flightrec/flightrec/policy"

// testPlan is the default plan, normalized.
func testPlan() *policy.Plan {
	p := &policy.Plan{
		DropHeaders: []string{"authorization", "proxy-authorization", "cookie", "set-cookie",
			"x-api-key", "x-auth-token", "x-csrf-token", "x-csrftoken", "x-xsrf-token",
			"x-client-data", "x-amz-security-token"},
		DropCookies: []string{"*"},
		DropParams: []string{"password", "passwd", "pwd", "token", "access_token", "id_token",
			"refresh_token", "code", "code_verifier", "client_secret", "secret", "api_key", "apikey",
			"auth", "session", "sig", "signature", "x-amz-signature", "x-amz-credential",
			"x-amz-security-token", "samlrequest", "samlresponse"},
		SecretKeys: []string{"password", "passwd", "pwd", "secret", "token", "accesstoken",
			"refreshtoken", "idtoken", "apikey", "clientsecret", "cardnumber", "cvv", "cvc", "pin",
			"ssn", "otp", "authorization"},
		MaskInputTypes:     []string{"password", "hidden"},
		MaskAutocomplete:   []string{"cc-*", "current-password", "new-password", "one-time-code"},
		MaskNamePatterns:   []string{`card|cc-?(num|number|csc|cvc|exp)|cvv|cvc|pass(word|wd)?|pin|otp|ssn|secret`},
		Detectors:          []string{"jwt", "pem", "aws", "github", "slack", "generic", "card"},
		EntropyThreshold:   3.5,
		DropBodyMimes:      []string{"application/octet-stream"},
		DropUnmaskedFrames: true,
	}
	p.Normalize()
	return p
}
