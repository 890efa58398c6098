/* Euler console: small progressive enhancements. Every page works without this file. */
(function () {
  "use strict";

  function csrf() {
    var meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.content : "";
  }

  function parse(html) {
    return new DOMParser().parseFromString(html, "text/html");
  }

  function swap(doc, ids) {
    ids.forEach(function (id) {
      if (!id) return;
      var fresh = doc.getElementById(id);
      var old = document.getElementById(id);
      if (fresh && old) old.replaceWith(document.importNode(fresh, true));
    });
  }

  // A form sent in place whose answer could not be shown says so in the form (what happened, what to do),
  // instead of leaving the page as it was without a word.
  function requestFailed(form, detail) {
    var box = form.querySelector("[data-request-error]");
    if (!box) {
      box = document.createElement("p");
      box.className = "error";
      box.setAttribute("role", "alert");
      box.setAttribute("data-request-error", "");
      form.appendChild(box);
    }
    box.textContent = (document.body.dataset.requestFailed || "The server did not answer as expected.") + " (" + detail + ")";
  }

  // Forms that reveal a secret once are sent in place: the page never becomes a POST result,
  // so reloading it shows the list only and never creates a second secret.
  async function submitInPlace(form) {
    var button = form.querySelector("[type=submit]");
    if (button) button.disabled = true;
    try {
      var response, doc;
      try {
        response = await fetch(form.action, {
          method: "POST",
          body: new FormData(form),
          credentials: "same-origin",
          headers: { "X-CSRFToken": csrf(), "X-Requested-With": "fetch" },
        });
        doc = parse(await response.text());
      } catch (err) {
        requestFailed(form, err && err.message ? err.message : "no answer");
        return;
      }
      var ids = (form.dataset.swap || "").split(/\s+/).filter(Boolean);
      if (!ids.some(function (id) { return doc.getElementById(id); })) {
        // A sign-in page (the session ended), a refusal, an error page: its status, and where a redirect led.
        var led = response.redirected ? " \u2192 " + new URL(response.url).pathname : "";
        requestFailed(form, "HTTP " + response.status + led);
        return;
      }
      var old = form.querySelector("[data-request-error]");
      if (old) old.remove();
      swap(doc, ids);
      var shown = document.querySelector("[data-once-output]:not(.hidden)");
      if (shown) shown.focus();
      if (response.ok && form.dataset.reset !== "no") form.reset();
    } finally {
      if (button) button.disabled = false;
    }
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      event.preventDefault();
      return;
    }
    if (form.hasAttribute("data-once-form")) {
      event.preventDefault();
      submitInPlace(form);
    }
  });

  document.addEventListener("change", function (event) {
    if (event.target.matches("select[data-autosubmit]")) event.target.form.submit();
  });

  document.addEventListener("click", async function (event) {
    var button = event.target.closest("[data-copy]");
    if (!button) return;
    var source = document.getElementById(button.dataset.copy);
    if (!source) return;
    var text = source.textContent.trim();
    try {
      await navigator.clipboard.writeText(text);
    } catch (err) {
      var range = document.createRange();
      range.selectNodeContents(source);
      var selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      document.execCommand("copy");
    }
    button.textContent = button.dataset.copied || "Copied";
  });

  // Live refresh: regions marked data-refresh-every="N" are re-read from the same URL (one fetch for all).
  var regions = Array.prototype.slice.call(document.querySelectorAll("[data-refresh-every]"));
  if (regions.length) {
    var seconds = Math.max(2, Math.min.apply(null, regions.map(function (r) { return parseInt(r.dataset.refreshEvery, 10) || 5; })));
    setInterval(async function () {
      if (document.hidden) return;
      try {
        var response = await fetch(window.location.href, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } });
        if (!response.ok) return;
        var doc = parse(await response.text());
        regions.forEach(function (region) {
          if (region.contains(document.activeElement) && document.activeElement !== document.body) return;
          var fresh = doc.getElementById(region.id);
          if (fresh && fresh.innerHTML !== region.innerHTML) region.innerHTML = fresh.innerHTML;
        });
        document.dispatchEvent(new CustomEvent("euler:refreshed"));
      } catch (err) {
        /* offline for a moment: the next tick tries again */
      }
    }, seconds * 1000);
  }
})();
