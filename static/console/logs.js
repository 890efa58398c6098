/* Euler console: the live log viewer of a job.

   The websocket /ws/jobs/{id}/logs/ sends the backlog of the latest attempt, then live chunks:
   {"type": "log", "attempt": N, "seq": S, "stream": "stdout"|"stderr", "data": "..."},
   {"type": "attempt", "attempt": N} when a retry starts, {"type": "end", "state": ...} when the job ends.
   After a dropped connection it reconnects with ?after_seq=<last seq shown>&attempt=<its attempt>, so nothing
   repeats or goes missing. */
(function () {
  "use strict";
  var view = document.getElementById("log-view");
  if (!view) return;
  var statusEl = document.getElementById("log-status");
  var follow = document.getElementById("log-follow");
  var pauseButton = document.getElementById("log-pause");
  var paused = false;
  var held = [];
  var lastSeq = -1; // of the attempt being shown
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
    if (lastSeq >= 0) url += "?after_seq=" + lastSeq + "&attempt=" + lastAttempt;
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
        fragment.appendChild(line("── " + (view.dataset.attemptLabel || "attempt") + " " + c.attempt + " ──\n", "sys"));
      }
      var span = line(c.data, c.stream === "stderr" ? "stderr" : "stdout");
      span.dataset.seq = c.seq;
      fragment.appendChild(span);
    });
    view.appendChild(fragment);
    if (follow.checked) view.scrollTop = view.scrollHeight;
  }

  function accept(chunk) {
    if (chunk.attempt !== lastAttempt) {
      lastAttempt = chunk.attempt; // a retry's log starts over at seq 0
      lastSeq = -1;
    }
    if (chunk.seq <= lastSeq) return; // already shown (a replay after a reconnect)
    lastSeq = chunk.seq;
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
    var items = Array.isArray(message) ? message : [message];
    items.forEach(function (m) {
      if (m.type === "log") {
        accept(m);
      } else if (m.type === "attempt") {
        lastAttempt = m.attempt; // a retry: its log starts over
        lastSeq = -1;
      } else if (m.type === "end") {
        ended = true;
        status("ended");
        document.dispatchEvent(new CustomEvent("euler:job-ended", { detail: m }));
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
      if (ended || event.code === 4401 || event.code === 4404) {
        if (!ended) status("closed");
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
