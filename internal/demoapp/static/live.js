// The cart badge, kept current over a WebSocket, and the Terms popup.
// Served as written (not through the minified bundle).
"use strict";
(function () {
  var badge = document.getElementById("cart-badge");
  var ws = null;
  if (badge && window.WebSocket) {
    // The badge is an enhancement: where no socket can be opened (a
    // rerun's network pin refuses them), the rendered count stays.
    try {
      ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws/cart");
    } catch (e) {
      ws = null;
    }
  }
  if (ws) {
    ws.onopen = function () {
      ws.send(JSON.stringify({ type: "hello", page: location.pathname }));
    };
    ws.onmessage = function (m) {
      var msg;
      try { msg = JSON.parse(m.data); } catch (e) { return; }
      if (msg.type === "cart") badge.textContent = String(msg.count);
    };
  }
  // Terms open in a popup window of their own, which its Close button shuts.
  var terms = document.getElementById("terms");
  if (terms) {
    terms.addEventListener("click", function (e) {
      e.preventDefault();
      window.open(terms.href, "terms", "popup,width=480,height=600");
    });
  }
  var close = document.getElementById("close-terms");
  if (close) close.addEventListener("click", function () { window.close(); });
})();
