"use strict";
// castdata view: the index (sort, filter, pages) and one episode at a time, rendered from the embedded data.
// Every element is built with textContent (never innerHTML): whatever a transcript holds renders as text.
(function () {
  const INDEX = JSON.parse(document.getElementById("castdata-index").textContent);
  const ROWS = INDEX.rows;
  const BY_KEY = new Map(ROWS.map((row) => [row.key, row]));
  const FACETS = ["domain", "split", "outcome", "category", "user_fault", "source"];
  const COLUMNS = [
    ["key", "episode"], ["domain", "domain"], ["split", "split"], ["task", "task"], ["trial", "trial"],
    ["agent", "agent"], ["reward", "reward"], ["termination", "termination"], ["invalid", "invalid"],
    ["category", "first error"], ["source", "source"], ["user_fault", "user fault"],
  ];
  const BADGES = {
    valid: "valid", critical: "invalid \u00b7 critical", minor: "invalid \u00b7 minor",
    uncertain: "uncertain", after: "after first error",
  };
  const ROLES = { system: "system prompt (the policy)", user: "user", agent: "agent", call: "agent \u00b7 tool call" };
  const DOT = " \u00b7 ";
  const FIRST = "\u2691 first critical error";
  const state = { filters: {}, search: "", sort: null, descending: false, page: 0 };
  const blocks = new Map();
  const app = document.getElementById("app");
  let opening = 0;
  document.getElementById("page-rows").textContent = INDEX.page_rows;
  document.getElementById("chunk-episodes").textContent = INDEX.chunk_episodes;

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  const text = (value) => (value === true ? "yes" : value === false ? "no" : value === null ? "" : String(value));
  const facetValues = (row, facet) => (facet === "category" ? row.categories : [text(row[facet])]);
  const episodeHash = (key) => "#episode=" + encodeURIComponent(key);
  const messageId = (key, step) => "m-" + key + "-" + step;

  // ---- the index -------------------------------------------------------------------------------------------
  function passes(row, search) {
    if (search && !row.key.toLowerCase().includes(search)) return false;
    const wanted = Object.entries(state.filters).filter(([, value]) => value);
    return wanted.every(([facet, value]) => facetValues(row, facet).includes(value));
  }

  function visibleRows() {
    const search = state.search.toLowerCase();
    const rows = ROWS.filter((row) => passes(row, search));
    if (state.sort) {
      const key = state.sort;
      const sign = state.descending ? -1 : 1;
      rows.sort((a, b) => {
        const x = a[key], y = b[key];
        if (typeof x === "number" && typeof y === "number") return sign * (x - y);
        return sign * text(x).localeCompare(text(y), undefined, { numeric: true });
      });
    }
    return rows;
  }

  function rerender(change) {
    return (event) => {
      change(event);
      showIndex();
    };
  }

  function facetMenu(facet) {
    const values = [...new Set(ROWS.flatMap((row) => facetValues(row, facet)))].sort();
    const choose = rerender((event) => {
      state.filters[facet] = event.target.value;
      state.page = 0;
    });
    const select = el("select", { "data-facet": facet, onchange: choose }, el("option", { value: "" }, "all"),
      values.map((value) => el("option", { value }, value === "" ? "(none)" : value)));
    select.value = state.filters[facet] || "";
    return el("label", { class: "facet" }, facet.replace("_", " "), " ", select);
  }

  function searchBox() {
    return el("input", { type: "search", placeholder: "episode id", value: state.search, oninput: (event) => {
      state.search = event.target.value;
      state.page = 0;
      showIndex();
      const box = app.querySelector("input[type=search]");
      box.focus();
      box.setSelectionRange(box.value.length, box.value.length);
    } });
  }

  function headerCell([key, title]) {
    const sorted = state.sort === key ? (state.descending ? "sorted down" : "sorted up") : null;
    return el("th", { class: sorted, onclick: rerender(() => {
      state.descending = state.sort === key ? !state.descending : false;
      state.sort = key;
    }) }, title);
  }

  function indexRow(row) {
    return el("tr", { class: row.outcome === "success" ? "ok" : "failed", "data-key": row.key },
      COLUMNS.map(([key]) => el("td", { class: "c-" + key },
        key === "key" ? el("a", { href: episodeHash(row.key) }, row.key) : text(row[key]))));
  }

  function showIndex() {
    const rows = visibleRows();
    const size = INDEX.page_rows;
    const pages = Math.max(1, Math.ceil(rows.length / size));
    state.page = Math.min(state.page, pages - 1);
    const first = state.page * size;
    const shown = rows.slice(first, first + size);
    const counts = `page ${state.page + 1} of ${pages}${DOT}episodes ${rows.length ? first + 1 : 0}\u2013`
      + `${first + shown.length} of ${rows.length}` + (rows.length === ROWS.length ? "" : ` (${ROWS.length} in all)`);
    const pager = el("div", { class: "pager" },
      el("button", { disabled: state.page === 0, onclick: rerender(() => { state.page -= 1; }) }, "\u2039 previous"),
      " ", counts, " ",
      el("button", { disabled: state.page >= pages - 1, onclick: rerender(() => { state.page += 1; }) },
        "next \u203a"));
    app.replaceChildren(
      el("div", { class: "filters" }, FACETS.map(facetMenu), searchBox()),
      pager,
      el("table", { class: "index" }, el("thead", {}, el("tr", {}, COLUMNS.map(headerCell))),
        el("tbody", {}, shown.map(indexRow))),
    );
    document.title = document.querySelector(".home").textContent;
  }

  // ---- one episode -----------------------------------------------------------------------------------------
  async function episodeRecord(row) {
    if (!blocks.has(row.chunk)) {
      blocks.set(row.chunk, (async () => {
        const binary = atob(document.getElementById("castdata-chunk-" + row.chunk).textContent.trim());
        const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
        const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
        return JSON.parse(await new Response(stream).text());
      })());
    }
    return (await blocks.get(row.chunk))[row.key];
  }

  function fact(name, value) {
    if (value === null || value === undefined || value === "") return null;
    return [el("dt", {}, name), el("dd", {}, text(value))];
  }

  function stepLink(key, step, title) {
    return el("a", { href: "#" + messageId(key, step), class: "step-link", "data-step": step }, title);
  }

  function mistake(row, m) {
    return el("li", {}, stepLink(row.key, m.step, "#" + m.step), " ", el("b", {}, m.kind),
      DOT + (m.outcome_breaking ? "breaks the outcome" : "harmless to the outcome"),
      m.intercepted ? DOT + "intercepted by the critic" : null, m.detail ? DOT + m.detail : null);
  }

  function privilegedBlock(row, record) {
    const p = record.privileged;
    return el("section", { class: "privileged" },
      el("h2", {}, "What the agent never saw"),
      el("dl", {}, fact("user id", p.user_id), fact("required outputs", p.required_outputs.join(", ") || "none")),
      el("h3", {}, "Hidden instruction (the user's goal)"), el("p", { class: "text" }, p.instruction),
      el("h3", {}, "Gold actions"),
      el("ol", { class: "gold" }, p.gold_actions.map((action) => el("li", {}, el("code", {}, action)))),
      p.injected_mistakes.length ? [
        el("h3", {}, "Injected mistakes (scripted agent)"),
        el("ul", {}, p.injected_mistakes.map((m) => mistake(row, m))),
      ] : null);
  }

  function badge(kind) {
    return el("span", { class: "badge b-" + kind }, BADGES[kind]);
  }

  function evidenceItem(row, item) {
    const where = item.step === null ? el("span", { class: "source" }, item.source)
      : el("a", { href: "#" + messageId(row.key, item.step), class: "evidence-link", "data-step": item.step,
        "data-quote": item.quote }, `#${item.step} (${item.source})`);
    return el("li", {}, where, " ", el("q", {}, item.quote));
  }

  function rationale(row, label) {
    const r = label.rationale;
    const parts = [el("dl", { class: "rationale" },
      fact("observed", r.observed), fact("required", r.required), fact("assessment", r.assessment))];
    if (label.policy_refs.length) {
      parts.push(el("h4", {}, "Policy clauses"), el("ul", {}, label.policy_refs.map((ref) =>
        el("li", {}, el("code", {}, ref.clause_id), " ", el("q", {}, ref.quote)))));
    }
    if (label.evidence.length) {
      const items = label.evidence.map((item) => evidenceItem(row, item));
      parts.push(el("h4", {}, "Evidence"), el("ul", { class: "evidence" }, items));
    }
    if (label.expected !== null) {
      parts.push(el("h4", {}, "Expected action"), el("pre", { class: "text" }, label.expected));
    }
    const source = [`label: ${label.method}` + (label.teacher ? ` (${label.teacher})` : "")];
    if (label.signals.length) source.push("signals: " + label.signals.join(", "));
    if (label.mc) source.push(`Monte-Carlo success ${label.mc[0]} \u2192 ${label.mc[1]}`);
    parts.push(el("p", { class: "label-source" }, source.join(DOT)));
    return parts;
  }

  function interception(i) {
    return el("div", { class: "interception" },
      el("h4", {}, `Interception (attempt ${i.attempt}): the critic said ${i.verdict}`),
      el("h5", {}, "Proposed"), el("pre", { class: "text" }, i.proposed),
      el("h5", {}, "Critique"), el("p", { class: "text" }, i.critique),
      el("h5", {}, "Revised"),
      i.revised === null ? el("p", {}, "none: the proposal executed as it was")
        : el("pre", { class: "text" }, i.revised));
  }

  function labelBlock(row, label, interceptions) {
    const under = label && label.badge === "after"
      ? el("span", { class: "under" }, label.verdict + (label.severity !== "none" ? DOT + label.severity : "")) : null;
    const summary = el("summary", {},
      label ? badge(label.badge) : el("span", { class: "badge b-none" }, "unlabelled"), under,
      label && label.first ? el("span", { class: "first-mark" }, FIRST) : null,
      label ? label.categories.map((c) => el("span", { class: "category" }, c)) : null,
      interceptions.length ? el("span", { class: "category" }, `intercepted \u00d7${interceptions.length}`) : null);
    const parts = [label ? rationale(row, label) : null, interceptions.map(interception)];
    const open = Boolean(label && label.first);
    return el("details", { class: "label", open }, summary, el("div", { class: "why" }, parts));
  }

  function messageBlock(row, record, step) {
    const message = record.messages[step];
    const label = record.labels[step];
    const interceptions = record.interceptions.filter((i) => i.step === step);
    const role = message.kind === "result" ? "tool result" + DOT + message.name : ROLES[message.kind] || message.kind;
    const body = el("div", { class: "text" }, message.text);
    const classes = ["msg", "k-" + message.kind];
    if (label) classes.push("v-" + label.badge);
    if (label && label.first) classes.push("first-error");
    const bubble = message.kind === "system"
      ? el("details", { class: "bubble" }, el("summary", {}, `${message.text.length} characters`), body)
      : el("div", { class: "bubble" }, body);
    return el("div", { class: classes.join(" "), id: messageId(row.key, step), "data-step": step },
      el("div", { class: "head" }, stepLink(row.key, step, "#" + step), " ", role,
        message.violation ? el("span", { class: "violation" }, message.violation) : null),
      bubble,
      label || interceptions.length ? labelBlock(row, label, interceptions) : null);
  }

  function highlight(key, step, quote) {
    for (const mark of app.querySelectorAll("mark.cited")) mark.parentNode.replaceChildren(mark.parentNode.textContent);
    for (const old of app.querySelectorAll(".msg.target")) old.classList.remove("target");
    const target = document.getElementById(messageId(key, step));
    if (!target) return;
    target.classList.add("target");
    for (const folded of target.querySelectorAll("details.bubble")) folded.open = true;
    const body = target.querySelector(".bubble .text");
    const at = quote ? body.textContent.indexOf(quote) : -1;
    const mark = at >= 0 ? el("mark", { class: "cited" }, quote) : null;
    if (mark) {
      const whole = body.textContent;
      body.replaceChildren(whole.slice(0, at), mark, whole.slice(at + quote.length));
    }
    (mark || target).scrollIntoView({ block: "center" });  // a mark deep in a long tool result scrolls its bubble too
  }

  function neighbours(key) {
    const rows = visibleRows();
    const at = rows.findIndex((row) => row.key === key);
    return [at > 0 ? rows[at - 1] : null, at >= 0 && at < rows.length - 1 ? rows[at + 1] : null];
  }

  function episodeNav(row, record) {
    const [previous, next] = neighbours(row.key);
    const firstError = Object.keys(record.labels).find((s) => record.labels[s].first);
    return el("nav", { class: "episode-nav" }, el("a", { href: "#" }, "\u2190 index"),
      previous ? el("a", { href: episodeHash(previous.key) }, "\u2039 " + previous.key) : null,
      next ? el("a", { href: episodeHash(next.key) }, next.key + " \u203a") : null,
      firstError !== undefined ? stepLink(row.key, Number(firstError), `${FIRST} (#${firstError})`) : null);
  }

  function facts(row, record) {
    const o = record.outcome;
    return el("dl", { class: "facts" },
      fact("domain", row.domain), fact("split", row.split), fact("task", row.task), fact("trial", row.trial),
      fact("agent", row.agent), fact("user", record.user), fact("reward", row.reward),
      fact("termination", row.termination),
      fact("db match", o.db_match), fact("outputs missing", o.outputs_missing.join(", ")), fact("error", o.error),
      fact("invalid labels", row.labelled ? row.invalid : "not labelled"), fact("source", row.source),
      fact("user fault", row.user_fault), fact("run", row.run), fact("dataset split", row.dataset_split),
      fact("seed", record.seed));
  }

  async function showEpisode(key, step) {
    const row = BY_KEY.get(key);
    if (!row) {
      delete app.dataset.episode;
      app.replaceChildren(el("p", { class: "note" }, `No episode ${key} in this page. `,
        el("a", { href: "#" }, "Index")));
      return;
    }
    if (app.dataset.episode !== key) {
      const ticket = ++opening;
      app.replaceChildren(el("p", { class: "note" }, `Opening ${key}\u2026`));
      const record = await episodeRecord(row);
      if (ticket !== opening) return;  // another episode was asked for meanwhile
      const conversation = record.messages.map((_, s) => messageBlock(row, record, s));
      app.replaceChildren(episodeNav(row, record), el("h1", { class: row.outcome }, row.key), facts(row, record),
        el("div", { class: "episode-body" },
          el("section", { class: "conversation" }, el("h2", {}, "Conversation"), conversation),
          privilegedBlock(row, record)));
      app.dataset.episode = key;
      document.title = key + DOT + document.querySelector(".home").textContent;
      window.scrollTo(0, 0);
    }
    if (step !== undefined) highlight(key, step, null);
  }

  function route() {
    const hash = decodeURIComponent(location.hash.slice(1));
    if (hash.startsWith("episode=")) return showEpisode(hash.slice("episode=".length));
    const message = /^m-(.+)-(\d+)$/.exec(hash);
    if (message) return showEpisode(message[1], Number(message[2]));
    opening += 1;
    delete app.dataset.episode;
    return showIndex();
  }

  app.addEventListener("click", (event) => {
    const link = event.target.closest("a.evidence-link, a.step-link");
    if (!link || !app.dataset.episode) return;
    event.preventDefault();
    const key = app.dataset.episode;
    const step = Number(link.dataset.step);
    history.pushState(null, "", "#" + messageId(key, step));
    highlight(key, step, link.dataset.quote || null);
  });
  window.addEventListener("hashchange", route);
  if (!location.hash && INDEX.opened !== null) history.replaceState(null, "", episodeHash(INDEX.opened));
  route();
})();
