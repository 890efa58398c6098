/* Euler console: the live log viewer of a job (websocket: backlog, then live; resumes after the last seq). */
(function () {
  "use strict";
  var view = document.getElementById("log-view");
  if (!view) return;
  var statusEl = document.getElementById("log-status");
  var follow = document.getElementById("log-follow");
  var pauseButton = document.getElementById("log-pause");
  var paused = false;
  var held = [];
  var seen = {}; // attempt id -> highest seq shown
  var lastAttempt = null;
  var currentAttemptNumber = null;
  var ended = false;
  var retries = 0;

  function status(key) {
    statusEl.textContent = statusEl.dataset[key] || key;
    statusEl.dataset.state = key;
  }

  function socketUrl() {
    var scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    var url = scheme + "//" + window.location.host + view.dataset.ws;
    if (lastAttempt !== null) url += "?attempt=" + lastAttempt + "&after=" + seen[lastAttempt];
    return url;
  }

  function line(text, cls) {
    var span = document.createElement("span");
    span.className = cls;
    span.textContent = text;
    return span;
  }

  function show(chunks) {
    var fragment = document.createDocumentFragment();
    chunks.forEach(function (c) {
      if (c.attempt !== undefined && c.attempt !== currentAttemptNumber) {
        currentAttemptNumber = c.attempt;
        fragment.appendChild(line("── attempt " + c.attempt + " ──\n", "sys"));
      }
      var span = line(c.data, c.stream === "stderr" ? "stderr" : "stdout");
      span.dataset.seq = c.seq;
      fragment.appendChild(span);
    });
    view.appendChild(fragment);
    if (follow.checked) view.scrollTop = view.scrollHeight;
  }

  function accept(chunk) {
    var key = String(chunk.attempt_id !== undefined ? chunk.attempt_id : chunk.attempt);
    if (seen[key] !== undefined && chunk.seq <= seen[key]) return; // replayed after a reconnect
    seen[key] = chunk.seq;
    lastAttempt = key;
    if (paused) held.push(chunk);
    else show([chunk]);
  }

  function onMessage(event) {
    var message;
    try {
      message = JSON.parse(event.data);
    } catch (err) {
      return;
    }
    var items = Array.isArray(message) ? message : message.chunks || message.logs || [message];
    items.forEach(function (m) {
      var type = m.type || "log";
      if (type.indexOf("log") !== -1 || m.data !== undefined) {
        accept(m);
      } else if (type.indexOf("state") !== -1 || type === "end" || type === "eof") {
        if (m.terminal || type === "end" || type === "eof") {
          ended = true;
          status("ended");
        }
        document.dispatchEvent(new CustomEvent("euler:job-state", { detail: m }));
      }
    });
  }

  function connect() {
    status(retries ? "reconnecting" : "connecting");
    var socket = new WebSocket(socketUrl());
    socket.onopen = function () {
      retries = 0;
      status(paused ? "paused" : "live");
    };
    socket.onmessage = onMessage;
    socket.onclose = function (event) {
      if (ended || event.code === 1000 || event.code === 4404 || event.code === 4403) {
        if (ended || event.code === 1000) status("ended");
        return;
      }
      retries += 1;
      status("reconnecting");
      window.setTimeout(connect, Math.min(10000, 500 * Math.pow(2, Math.min(retries, 5))));
    };
  }

  pauseButton.addEventListener("click", function () {
    paused = !paused;
    pauseButton.setAttribute("aria-pressed", String(paused));
    pauseButton.textContent = paused ? pauseButton.dataset.resume : pauseButton.dataset.pause;
    if (!paused && held.length) {
      show(held);
      held = [];
    }
    if (!ended) status(paused ? "paused" : "live");
  });

  view.addEventListener("scroll", function () {
    // Scrolling up to read stops the auto-scroll; scrolling back to the end turns it on again.
    var atEnd = view.scrollHeight - view.scrollTop - view.clientHeight < 8;
    follow.checked = atEnd;
  });

  connect();
})();
