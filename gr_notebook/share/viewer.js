// The shared page's viewer: reads the data the page embeds and draws it. Every text from a
// run goes into the page through textContent, never as markup, so a run's content stays text.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("gr-data").textContent);
  const texts = data.texts;
  const T = (i) => (i === null || i === undefined ? "" : texts[i]);
  const app = document.getElementById("app");
  const state = { view: "run", run: 0, turn: null, pair: 0, shadows: true, showSame: false };

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "onclick") node.addEventListener("click", (e) => { e.preventDefault(); value(e); });
      else if (key === "style") node.setAttribute("style", value);
      else node.setAttribute(key, value);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }
  const link = (label, go, title) => el("a", { href: "#", class: "link", onclick: go, title }, label);
  const badge = (text, kind) => el("span", { class: "badge " + (kind || text) }, text);
  const pre = (text, cls) => el("pre", { class: cls }, text);
  const fmt = (n) => (typeof n === "number" ? n.toLocaleString("en-US") : String(n));
  const money = (c) => (c === null || c === undefined ? "not priced" : "$" + c.toFixed(4));

  function go(next) {
    Object.assign(state, next);
    const run = data.runs[state.run];
    const where = state.view === "compare" ? "compare=" + state.pair
      : state.view === "index" ? "index" : "run=" + state.run + (state.turn !== null ? "&turn=" + state.turn : "");
    try { history.replaceState(null, "", "#" + where); } catch (err) { /* a sandboxed frame */ }
    draw();
    if (run && next.scroll) {
      const target = document.getElementById(next.scroll);
      if (target) target.scrollIntoView({ block: "center" });
    }
  }

  function fromHash() {
    const params = new URLSearchParams(location.hash.slice(1));
    const number = (key) => (params.has(key) && /^\d+$/.test(params.get(key)) ? Number(params.get(key)) : null);
    if (params.has("index") && data.index) state.view = "index";
    else if (number("compare") !== null && number("compare") < data.pairs.length) {
      state.view = "compare"; state.pair = number("compare");
    } else if (number("run") !== null && number("run") < data.runs.length) {
      state.view = "run"; state.run = number("run"); state.turn = number("turn");
    } else state.view = data.index && data.runs.length > 1 ? "index" : "run";
  }

  function nav() {
    const bar = document.getElementById("nav");
    bar.replaceChildren();
    if (data.index) bar.append(el("button", { class: state.view === "index" ? "on" : "", onclick: () => go({ view: "index" }) }, "Index"));
    if (data.runs.length > 1) {
      const pick = el("select", { "aria-label": "run" });
      if (state.view !== "run") pick.append(el("option", { value: "", selected: true, disabled: true }, "a run…"));
      data.runs.forEach((run, i) => pick.append(el("option", { value: i, selected: state.view === "run" && i === state.run }, run.id)));
      pick.addEventListener("change", () => go({ view: "run", run: Number(pick.value), turn: null }));
      bar.append(pick);
    }
    data.pairs.forEach((pair, i) => bar.append(el("button", {
      class: state.view === "compare" && state.pair === i ? "on" : "",
      onclick: () => go({ view: "compare", pair: i }),
    }, "Compare " + data.runs[pair.a].id.slice(-6) + " ↔ " + data.runs[pair.b].id.slice(-6))));
  }

  function draw() {
    nav();
    app.replaceChildren();
    if (state.view === "index") drawIndex();
    else if (state.view === "compare") drawCompare(data.pairs[state.pair]);
    else drawRun(data.runs[state.run]);
  }

  function drawIndex() {
    const index = data.index;
    app.append(el("h2", {}, index.title));
    const head = el("tr", {}, index.columns.map((c) => el("th", {}, c)));
    const rows = index.rows.map((row) => el("tr", {}, row.cells.map((cell, i) => el("td", {},
      i === 0 && row.run !== null ? link(String(cell), () => go({ view: "run", run: row.run, turn: null })) : String(cell)))));
    app.append(el("table", { id: "index" }, el("thead", {}, head), el("tbody", {}, rows)));
  }

  function header(run) {
    const s = run.settings;
    const parent = run.parent;
    const parentAt = parent ? data.runs.findIndex((r) => r.id === parent.id) : -1;
    return el("div", { class: "card", id: "header" },
      el("div", {}, el("b", {}, "Run " + run.id), " · ",
        el("span", { class: "status " + run.status }, run.status),
        run.reason ? el("span", { class: "muted" }, " — " + run.reason) : null),
      pre(T(run.job), "job"),
      el("div", {}, "model ", el("b", {}, s.model), " · host ", s.harness,
        " · ", fmt(run.turns), " turns · ", fmt(run.tokens), " tokens · ", money(run.cost)),
      el("div", {}, "live guardrails: ", s.live.length ? s.live.join(", ") : el("span", { class: "empty" }, "none")),
      el("div", {}, "shadow guardrails: ", s.shadow.length ? s.shadow.map((g) => badge(g, "shadow")) : el("span", { class: "empty" }, "none")),
      el("div", {}, "limits: ", s.limits.length ? s.limits.join(", ") : "none",
        " · price: ", s.price || "not recorded"),
      parent ? el("div", {}, parent.how || "resumed", " of run ",
        parentAt >= 0 ? link(parent.id, () => go({ view: "run", run: parentAt, turn: parent.turn })) : parent.id,
        " at turn " + parent.turn) : null,
      run.missing.length ? el("div", { class: "notes" }, run.missing.map((m) => el("div", {}, m))) : null);
  }

  function turnNumbers(run) { return run.by_turn.map((t) => t.turn); }

  function drawRun(run) {
    const numbers = turnNumbers(run);
    if (state.turn === null || !numbers.includes(state.turn)) {
      state.turn = numbers.find((n) => n > 0) ?? numbers[0] ?? 0;
    }
    app.append(header(run));
    app.append(el("h2", {}, "Timeline"));
    const last = Math.max(1, ...numbers);
    const shadows = run.marks.filter((mark) => mark.shadow).length;
    if (shadows) {
      const box = el("input", { type: "checkbox", id: "show-shadows", checked: state.shadows });
      box.addEventListener("change", () => go({ shadows: box.checked }));
      app.append(el("label", { class: "muted" }, box, " show the shadow guardrails' " + shadows + " decisions against the model"));
    }
    const shown = run.marks.filter((mark) => state.shadows || !mark.shadow);
    const strip = el("div", { class: "strip", id: "strip" });
    for (const mark of shown) {
      strip.append(el("div", {
        class: "tick tone-" + mark.tone + (mark.shadow ? " shadow" : ""),
        style: "left:" + (100 * mark.turn / (last + 1)).toFixed(2) + "%",
        title: "turn " + mark.turn + ": " + mark.text,
        onclick: () => go({ turn: mark.turn }),
      }));
    }
    strip.append(el("div", { class: "here", style: "left:" + (100 * state.turn / (last + 1)).toFixed(2) + "%" }));
    app.append(strip);
    const marks = shown.map((mark) => el("li", { class: (mark.shadow ? "shadow " : "") + "tone-" + mark.tone },
      link("turn " + mark.turn, () => go({ turn: mark.turn, scroll: "turn" })), " · ", mark.text));
    app.append(marks.length ? el("ul", { class: "marks", id: "marks" }, marks) : el("p", { class: "empty" }, "Nothing on the timeline."));
    if (numbers.length) app.append(scrubber(numbers));
    const turn = run.by_turn.find((t) => t.turn === state.turn);
    app.append(turn ? drawTurn(run, turn) : el("p", { class: "empty" }, "No turns recorded."));
    app.append(drawFiles(run));
  }

  function scrubber(numbers) {
    const at = numbers.indexOf(state.turn);
    const range = el("input", { type: "range", min: 0, max: Math.max(0, numbers.length - 1), value: at, id: "scrub", "aria-label": "turn" });
    range.addEventListener("input", () => go({ turn: numbers[Number(range.value)] }));
    return el("div", { class: "scrubber" },
      el("button", { onclick: () => step(-1), title: "previous turn (←)" }, "◀"),
      el("span", { id: "turn-label" }, "Turn " + state.turn + " of " + numbers[numbers.length - 1]),
      range,
      el("button", { onclick: () => step(1), title: "next turn (→)" }, "▶"));
  }

  function step(by) {
    if (state.view !== "run") return;
    const numbers = turnNumbers(data.runs[state.run]);
    const at = numbers.indexOf(state.turn) + by;
    if (at >= 0 && at < numbers.length) {
      go({ turn: numbers[at] });
      const range = document.getElementById("scrub");
      if (range) range.focus();
    }
  }

  function drawTurn(run, turn) {
    const left = el("div", {});
    left.append(el("h3", {}, "Phase"), el("div", {}, turn.phase || el("span", { class: "empty" }, "none")));
    left.append(el("h3", {}, "Todo layer, as the model saw it"),
      turn.todos !== null ? pre(T(turn.todos), "todos") : el("p", { class: "empty" }, "No todo layer at this turn."));
    left.append(el("h3", {}, "Plan, as the turn began"),
      turn.plan !== null ? pre(T(turn.plan), "plan") : el("p", { class: "empty" }, "No plan file at this turn."));
    left.append(el("h3", {}, "Meters"));
    if (!turn.meters.length) left.append(el("p", { class: "empty" }, "No model call in this turn."));
    for (const [label, used, limit] of turn.meters) {
      const share = limit ? Math.min(1, used / limit) : 0;
      left.append(el("div", { class: "meter" },
        label + ": " + fmt(used) + (limit ? " of " + fmt(limit) : ""),
        limit ? el("div", { class: "bar" }, el("div", { class: "fill" + (share > 0.8 ? " high" : ""), style: "width:" + (100 * share).toFixed(1) + "%" })) : null));
    }
    if (turn.context) {
      const total = Math.max(1, turn.context.layers.reduce((sum, [, n]) => sum + n, 0));
      left.append(el("h3", {}, "Context: " + fmt(turn.context.total) + " tokens, " + fmt(turn.context.messages) + " messages"),
        el("div", { class: "layers" }, turn.context.layers.map(([name, n], i) =>
          el("span", { class: "layer" + i, style: "width:" + (100 * n / total).toFixed(2) + "%", title: name + ": " + fmt(n) }))),
        el("table", {}, el("tbody", {}, turn.context.layers.map(([name, n], i) =>
          el("tr", {}, el("td", {}, el("span", { class: "badge layer" + i }, String(i + 1)), name), el("td", {}, fmt(n)))))));
    }
    const right = el("div", {});
    if (turn.model) {
      right.append(el("h3", {}, "The model said"),
        el("div", { class: "muted" }, fmt(turn.model.in) + " tokens in, " + fmt(turn.model.out) + " out · " + turn.model.seconds + " s · stop: " + turn.model.stop),
        T(turn.model.text) ? pre(T(turn.model.text), "said") : el("p", { class: "empty" }, "(no text)"));
      if (turn.model.thinking !== null) right.append(el("details", {}, el("summary", {}, "Thinking"), pre(T(turn.model.thinking))));
    }
    right.append(el("h3", {}, "Tool calls (" + turn.calls.length + ")"));
    if (!turn.calls.length) right.append(el("p", { class: "empty" }, "None."));
    turn.calls.forEach((call) => right.append(drawCall(call)));
    if (turn.checks.length || turn.feedback.length) {
      right.append(el("h3", {}, "Checks of the turn"), decisions(turn.checks), turn.feedback.map(feedback));
    }
    if (turn.changed.length) {
      right.append(el("h3", {}, "Files this turn changed"));
      for (const [path, text] of turn.changed) {
        right.append(el("details", {}, el("summary", {}, path, text === null ? " (removed)" : ""), text !== null ? pre(T(text)) : null));
      }
    }
    if (turn.lines.length) {
      right.append(el("h3", {}, "Everything that happened"),
        el("ul", { class: "lines" }, turn.lines.map((line) => line.kind === "traceback"
          ? el("li", {}, pre(line.text))
          : el("li", { class: (line.shadow ? "shadow " : "") + "tone-" + (line.tone || "plain") }, line.text))));
    }
    return el("div", { class: "grid", id: "turn" }, left, right);
  }

  function drawCall(call) {
    const live = call.decisions.filter((d) => !d.shadow).map((d) => d.verdict);
    const denied = live.includes("deny") || (call.approval && call.approval.decision === "deny");
    const outcome = denied ? "denied" : call.result === null ? "did not finish" : call.error ? "failed" : "ran";
    const box = el("div", { class: "card call " + (denied ? "denied" : call.error ? "failed" : "") },
      el("div", {}, el("b", {}, call.tool), " ", badge(outcome, denied ? "deny" : call.error ? "warn" : "allow"),
        call.effect ? el("span", { class: "muted" }, " effect: " + call.effect) : null,
        call.seconds !== undefined ? el("span", { class: "muted" }, " · " + call.seconds + " s") : null));
    if (call.input !== null) box.append(el("div", { class: "muted" }, "input"), pre(T(call.input), "input"));
    box.append(decisions(call.decisions));
    if (call.approval) {
      const a = call.approval;
      box.append(el("div", { class: "approval" }, "Approval asked (" + (a.asked || "?") + "): " + (a.reason || ""),
        a.decision ? el("span", {}, " → ", badge(a.decision), "by " + a.by + " after " + a.waited + " s", a.why ? " — " + a.why : "") : " → no answer"));
      if (a.edited) box.append(el("div", { class: "muted" }, "the input as the person edited it"), pre(a.edited));
    }
    if (call.result !== null) box.append(el("div", { class: "muted" }, call.error ? "error" : "result"), pre(T(call.result), "result"));
    call.feedback.forEach((block) => box.append(feedback(block)));
    return box;
  }

  function decisions(list) {
    if (!list.length) return el("div", { class: "empty" }, "No guardrail decided anything here.");
    return el("table", { class: "decisions" }, el("thead", {}, el("tr", {}, el("th", {}, "guardrail"), el("th", {}, "mode"), el("th", {}, "verdict"), el("th", {}, "reason"))),
      el("tbody", {}, list.map((d) => el("tr", { class: d.shadow ? "shadow" : "" },
        el("td", {}, d.who), el("td", {}, d.shadow ? badge("shadow") : "live"), el("td", {}, badge(d.verdict)), el("td", {}, d.reason)))));
  }

  function feedback(block) {
    return el("div", { class: "feedback" + (block.shadow ? " shadow" : "") },
      el("b", {}, "Feedback from " + block.provider), " ", badge(block.severity, block.severity === "error" ? "alert" : "warn"),
      block.shadow ? badge("shadow") : null, el("div", {}, block.summary), pre(T(block.text)));
  }

  function drawFiles(run) {
    const box = el("div", { id: "files" }, el("h2", {}, "Files"));
    if (!run.files.length) {
      box.append(el("p", { class: "empty" }, "None recorded."));
      return box;
    }
    const shown = el("div", {});
    const row = (file) => el("tr", {},
      el("td", {}, file.text === null ? file.path + (file.removed ? " (removed)" : "")
        : link(file.path + (file.removed ? " (removed)" : ""), () => shown.replaceChildren(el("h3", {}, file.path + ", as the run left it"), pre(T(file.text))))),
      el("td", {}, file.turns.map((t) => link(String(t), () => go({ turn: t, scroll: "turn" }))).flatMap((a) => [a, " "])));
    const head = () => el("thead", {}, el("tr", {}, el("th", {}, "file"), el("th", {}, "changed in turns")));
    const changed = run.files.filter((f) => f.turns.length), kept = run.files.filter((f) => !f.turns.length);
    box.append(changed.length ? el("table", { id: "changed-files" }, head(), el("tbody", {}, changed.map(row)))
      : el("p", { class: "empty" }, "The run changed no file after its first checkpoint."));
    if (kept.length) {
      box.append(el("details", {}, el("summary", {}, kept.length + " more files in the workspace, which no turn changed"),
        el("table", {}, head(), el("tbody", {}, kept.map(row)))));
    }
    box.append(shown);
    return box;
  }

  function callLine(call) {
    const verdicts = call.decisions.map((d) => badge(d.verdict + (d.shadow ? " (shadow)" : ""), d.shadow ? "shadow" : d.verdict));
    const input = T(call.input).replace(/\s+/g, " ");
    return el("div", {}, el("b", {}, call.tool), " ", verdicts, el("span", { class: "muted" }, input.length > 90 ? input.slice(0, 90) + "…" : input));
  }

  function drawCompare(pair) {
    const a = data.runs[pair.a], b = data.runs[pair.b];
    app.append(el("h2", {}, "Run " + a.id + " ↔ run " + b.id));
    app.append(el("p", { id: "divergence-note" }, pair.divergence === null
      ? "The two runs agree on every turn both recorded."
      : el("span", {}, "They first part at ", link("turn " + pair.divergence, () => document.getElementById("divergence").scrollIntoView({ block: "center" })),
        ": the tool calls, or what the live guardrails decided about them, differ there.")));
    const byA = new Map(a.by_turn.map((t) => [t.turn, t])), byB = new Map(b.by_turn.map((t) => [t.turn, t]));
    const numbers = [...new Set([...byA.keys(), ...byB.keys()])].filter((n) => n > 0).sort((x, y) => x - y);
    const first = (run) => Math.min(...run.by_turn.map((t) => t.turn).filter((n) => n > 0));
    const cell = (run, n, turn) => el("td", { class: "side" }, turn === undefined
      ? el("span", { class: "empty" }, run.parent && n < first(run) ? "(before the fork: its parent's turn)" : "(no turn)")
      : turn.calls.length ? turn.calls.map(callLine) : el("span", { class: "empty" }, turn.model ? "no tool call" : "(no model call)"));
    // the turns well before the runs part are the same in both: folded into one row
    const same = pair.divergence === null || state.showSame ? [] : numbers.filter((n) => n < pair.divergence - 1);
    const folded = same.length > 1 ? el("tr", { id: "same-turns" }, el("td", {}, "…"), el("td", { colspan: 2, class: "empty" },
      link("turns " + same[0] + "–" + same[same.length - 1] + " are the same in both runs: show them", () => go({ showSame: true })))) : null;
    const rows = numbers.filter((n) => !folded || !same.includes(n)).map((n) => el("tr", { id: n === pair.divergence ? "divergence" : null, class: n === pair.divergence ? "diverge" : null },
      el("td", {}, n === pair.divergence ? "▶ " + n : String(n)),
      cell(a, n, byA.get(n)), cell(b, n, byB.get(n))));
    app.append(el("table", { id: "compare" }, el("thead", {}, el("tr", {}, el("th", {}, "turn"),
      el("th", {}, link("run " + a.id, () => go({ view: "run", run: pair.a, turn: pair.divergence }))),
      el("th", {}, link("run " + b.id, () => go({ view: "run", run: pair.b, turn: pair.divergence }))))), el("tbody", {}, folded, rows)));
  }

  document.addEventListener("keydown", (event) => {
    if (event.target && event.target.tagName === "SELECT") return;
    if (event.altKey || event.ctrlKey || event.metaKey) return; // the browser's: Alt+← is back
    if (event.key === "ArrowRight") { event.preventDefault(); step(1); }
    else if (event.key === "ArrowLeft") { event.preventDefault(); step(-1); }
  });

  window.addEventListener("hashchange", () => { fromHash(); draw(); }); // a link, or an address typed
  fromHash();
  draw();
  document.body.dataset.readyMs = String(Math.round(performance.now()));
  document.body.dataset.ready = "1";
})();
