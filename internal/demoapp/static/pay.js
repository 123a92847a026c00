// The payment provider's card frame: on the parent's {"type":"tokenize"}
// it exchanges the card for a token at its own origin and posts back
// {"type":"token","token"} or {"type":"error","error"}. Only the parent
// origin the frame was served for is answered. Served as written.
"use strict";
(function () {
  var parent = document.body.getAttribute("data-parent");
  var input = document.getElementById("card-number");
  window.addEventListener("message", function (m) {
    if (m.origin !== parent || !m.data || m.data.type !== "tokenize") return;
    fetch("/api/tokens", {method: "POST", headers: {"Content-Type": "application/json", "Accept": "application/json"},
      body: JSON.stringify({card: input.value})})
      .then(function (res) { return res.json().then(function (d) { return {ok: res.ok, d: d}; }); })
      .then(function (r) {
        window.parent.postMessage(r.ok ? {type: "token", token: r.d.token} : {type: "error", error: r.d.error || "TOKEN_FAILED"}, parent);
      })
      .catch(function () { window.parent.postMessage({type: "error", error: "PROVIDER_UNREACHABLE"}, parent); });
  });
})();
