// The verification page (docs/verifier.md): start a session, show the
// wallet button or the QR code, poll until the session ends, show the
// claims. Everything comes from this origin; the claims are written as
// text, never as markup.
'use strict';

(function () {
  const $ = (id) => document.getElementById(id);

  // The page's messages in its language, which lanyard rendered it in
  // (docs/translations.md): a JSON data block, not script.
  let MESSAGES = {};
  try {
    MESSAGES = JSON.parse($('messages').textContent) || {};
  } catch (_) {
    MESSAGES = {};
  }

  // The form of a message that depends on a value (docs/translations.md):
  // for a count, its plural category in the page's language
  // (Intl.PluralRules: Polish one, few, many; Arabic six), else the
  // value itself, such as an error code; `other` when none fits.
  function form(message, args) {
    const value = args ? args[message.on] : undefined;
    let key = String(value);
    if (message.count) {
      try {
        key = new Intl.PluralRules(document.documentElement.lang || undefined).select(Number(value));
      } catch (_) {
        key = 'other';
      }
    }
    const forms = message.forms || {};
    return typeof forms[key] === 'string' ? forms[key] : forms.other;
  }

  // Message `id` with its placeables ({status}, ...) filled from `args`.
  function t(id, args) {
    const message = MESSAGES[id];
    const chosen = message && typeof message === 'object' ? form(message, args) : message;
    const text = typeof chosen === 'string' ? chosen : id;
    return text.replace(/\{(\w+)\}/g, (whole, name) =>
      (args && Object.prototype.hasOwnProperty.call(args, name) ? String(args[name]) : whole));
  }

  // Polling starts at 1 s and backs off by half each time up to 5 s: quick
  // enough to feel live after the wallet presents, gentle on the service
  // over a session's minutes.
  const FIRST_POLL_MS = 1000;
  const MAX_POLL_MS = 5000;
  // How long past the session's lifetime the page keeps asking when the
  // server cannot be reached, before it says expired on its own.
  const EXPIRY_SLACK_MS = 10000;

  // docs/service.md §4.2 step 4: a phone gets the wallet button, with the QR code one
  // toggle away for a wallet on another device.
  const mobile = Boolean(
    (navigator.userAgentData && navigator.userAgentData.mobile) ||
      /Android|iPhone|iPad|iPod|Mobile/i.test(navigator.userAgent)
  );

  // Each start gets a number; a poll of an earlier start stops when it sees
  // a newer one.
  let run = 0;

  // Under an OpenID Connect issuer's path the page's API is too, and the
  // page carries the sealed login request it starts its session with
  // (docs/oidc.md). Set on <body> by lanyard, never by the URL.
  const base = () => document.body.dataset.base || '/';
  const authorization = () => document.body.dataset.authorization || '';

  function say(text) {
    $('status').textContent = text;
  }

  // `text` as the page's error; the server's own sentence (a code this
  // page does not know) is English, set apart as such so that its full
  // stop stays at its end on a right-to-left page.
  function showError(text, server) {
    const error = $('error');
    if (server) {
      const span = document.createElement('span');
      span.lang = 'en';
      span.dir = 'ltr';
      span.textContent = text;
      error.replaceChildren(span);
    } else {
      error.textContent = text;
    }
    error.hidden = !text;
  }

  // The session this tab is waiting on, kept for a reload (the language
  // switch reloads the page) to carry on with.
  const KEPT = 'lanyard-session';
  function keep(session, expiresAt) {
    try {
      sessionStorage.setItem(KEPT, JSON.stringify({
        session, expiresAt, page: location.pathname, request: document.body.dataset.request || '',
      }));
    } catch (_) {
      // Storage may be off; a reload then starts over.
    }
  }
  function forget() {
    try {
      sessionStorage.removeItem(KEPT);
    } catch (_) {
      // As above.
    }
  }
  function kept() {
    try {
      const stored = JSON.parse(sessionStorage.getItem(KEPT) || 'null');
      // The same page and, for a login, the same request: never another
      // login's session under this one's name.
      if (stored && stored.page === location.pathname && stored.expiresAt > Date.now() &&
        stored.request === (document.body.dataset.request || '') &&
        stored.session && typeof stored.session.transaction_id === 'string') {
        return stored;
      }
    } catch (_) {
      // Unreadable: start over.
    }
    forget();
    return null;
  }

  function reset() {
    $('present').hidden = true;
    $('result').hidden = true;
    $('restart').hidden = true;
    $('claims').replaceChildren();
    $('qr').replaceChildren();
    showError('');
    say('');
  }

  // Ends the session's screen with `text`: an error when `isError`, the
  // server's own English sentence when that is 'server'.
  function finish(text, isError) {
    forget();
    $('present').hidden = true;
    $('qr').replaceChildren();
    if (isError) {
      showError(text, isError === 'server');
      say('');
    } else {
      say(text);
    }
    $('start').hidden = true;
    $('restart').hidden = false;
    $('restart').focus();
  }

  // The answer's JSON object, or null when something other than lanyard
  // answered (a proxy's own page, say): a throw here would end the poll
  // silently and leave the page waiting for good.
  async function jsonOf(response, reviver) {
    try {
      const body = JSON.parse(await response.text(), reviver);
      return body && typeof body === 'object' ? body : null;
    } catch (_) {
      return null;
    }
  }

  // A number in the claims as the service wrote it. lanyard passes the
  // service's JSON text through unchanged, but JSON.parse makes every
  // number a double: 123456789012345678901234567890 would show as
  // 1.2345678901234568e+29, and 1.10 as 1.1.
  class NumberText {
    constructor(text) {
      this.text = text;
    }
  }

  // JSON.parse's reviver, keeping the source text of each number a double
  // would change. `context` is "JSON.parse source text access" (Chromium
  // 114, Firefox 135, Safari 18.4); without it a number shows as JS has it.
  function keepNumberText(_key, value, context) {
    if (typeof value !== 'number' || !context || typeof context.source !== 'string') return value;
    if (Number.isSafeInteger(value) && String(value) === context.source) return value;
    return new NumberText(context.source);
  }

  // lanyard's error: its code, and its sentence in the page's language
  // when the page knows the code; else the server's sentence (`server`),
  // else what the status means.
  async function failure(response) {
    const body = await jsonOf(response);
    const code = body && typeof body.error === 'string' ? body.error : '';
    if (code && typeof MESSAGES['error-' + code] === 'string') {
      return { code, text: t('error-' + code), server: false };
    }
    if (body && typeof body.message === 'string') return { code, text: body.message, server: true };
    return { code, text: t('http-error', { status: response.status }), server: false };
  }

  // Ends the session's screen with lanyard's error `failed`.
  function finishFailed(failed) {
    finish(failed.text, failed.server ? 'server' : true);
  }

  // Why lanyard ended a session `failed`, when it says (the service's
  // claims could not be used, say): an id the page translates.
  function failedMessage(body) {
    const reason = body.reason;
    return typeof reason === 'string' && MESSAGES['failed-' + reason] ? t('failed-' + reason) : null;
  }

  function setQrVisible(visible) {
    $('qr-panel').hidden = !visible;
    $('toggle-qr').setAttribute('aria-expanded', String(visible));
    $('toggle-qr').textContent = visible ? t('hide-qr') : t('show-qr');
  }

  function present(session) {
    // The SVG is lanyard's own rendering of request_uri; parsed as SVG,
    // not inserted as HTML.
    const parsed = new DOMParser().parseFromString(session.qr_svg, 'image/svg+xml');
    const svg = document.importNode(parsed.documentElement, true);
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', t('qr-label'));
    $('qr').replaceChildren(svg);
    // A wallet that is a web page (the demo's, or an https universal link)
    // opens in a new tab, leaving this page polling, so one browser can do
    // the whole flow. A wallet's own scheme (openid4vp:, haip:) hands over
    // to its app and leaves this page where it is; a new tab would be left
    // empty.
    const web = /^https?:/i.test(session.wallet_url);
    for (const id of ['wallet-button', 'same-device-link']) {
      const link = $(id);
      link.href = session.wallet_url;
      if (web) {
        link.target = '_blank';
        link.rel = 'noopener';
      } else {
        link.removeAttribute('target');
        link.removeAttribute('rel');
      }
    }
    $('on-this-device').hidden = !mobile;
    $('same-device').hidden = mobile;
    setQrVisible(!mobile);
    $('present').hidden = false;
    // The start button that had focus is hidden now; without this, focus
    // falls back to the document and a keyboard or screen reader user
    // loses their place.
    $('present').focus();
    say(mobile ? t('waiting-mobile') : t('waiting-desktop'));
  }

  // Characters that change how text around them reads without showing
  // themselves: the bidi controls (U+202E turns "evil.exe txt" into what
  // reads as "exe.live txt"), and every C0 and C1 control. Each is shown
  // as a visible mark instead, so a claim reads as what it holds.
  const INVISIBLE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

  // `text` as text nodes, each invisible character replaced by a mark
  // such as ⟨U+202E⟩ in a span of its own, so it cannot pass for the
  // claim's own text.
  function visibleText(text) {
    const nodes = [];
    let from = 0;
    for (const match of text.matchAll(INVISIBLE)) {
      if (match.index > from) nodes.push(document.createTextNode(text.slice(from, match.index)));
      const mark = document.createElement('span');
      mark.className = 'control';
      mark.title = t('control-character');
      const code = match[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0');
      mark.textContent = '\u27e8U+' + code + '\u27e9';
      nodes.push(mark);
      from = match.index + match[0].length;
    }
    if (from < text.length) nodes.push(document.createTextNode(text.slice(from)));
    return nodes;
  }

  // A name or a scalar value, in its own bidi isolate (the class) whose
  // direction comes from its own text (dir=auto): right-to-left text
  // reads right, and cannot reorder the text beside it.
  function isolated(tag, nodes) {
    const element = document.createElement(tag);
    element.className = 'isolated';
    element.dir = 'auto';
    element.replaceChildren(...nodes);
    return element;
  }

  function note(text) {
    const span = document.createElement('span');
    span.className = 'note';
    span.textContent = text;
    return [span];
  }

  // Deeper than any credential's claims go; a bound keeps a hostile
  // nesting from running the page out of stack or off the screen.
  const MAX_DEPTH = 12;

  // The nodes that show `value`: an object as a nested definition list,
  // an array as a numbered list, anything else as its text.
  function valueNodes(value, depth, name) {
    if (value instanceof NumberText) return [document.createTextNode(value.text)];
    if (typeof value === 'boolean') return [document.createTextNode(t(value ? 'value-true' : 'value-false'))];
    if (typeof value === 'string') return visibleText(asDate(value) || value);
    if (value === null || typeof value !== 'object') return [document.createTextNode(String(value))];
    if (depth >= MAX_DEPTH) return note(t('nested-too-deep'));
    if (Array.isArray(value)) {
      if (value.length === 0) return note(t('empty-list'));
      const list = document.createElement('ol');
      list.className = 'claim-list';
      list.replaceChildren(...value.map((item) => entry('li', item, depth + 1)));
      return [list];
    }
    const rows = Object.entries(value);
    if (rows.length === 0) return note(t('empty-object'));
    return [claimList(document.createElement('dl'), rows, depth + 1, depth === 0 ? name : '')];
  }

  // A dd or li holding `value`: isolated when it is text, a plain
  // container when it holds a nested list, whose own entries are. A list
  // item's text is isolated in a span inside it: the item's direction
  // places its number, which belongs on the list's side ("1." right of
  // "DE" on an Arabic page), not on its text's.
  function entry(tag, value, depth, name) {
    const nodes = valueNodes(value, depth, name);
    const nested = value !== null && typeof value === 'object' && !(value instanceof NumberText);
    if (!nested && tag === 'dd') return isolated(tag, nodes);
    const element = document.createElement(tag);
    element.replaceChildren(...(nested ? nodes : [isolated('span', nodes)]));
    return element;
  }

  // An ISO 8601 calendar date (1984-01-26) as a date in the page's
  // language. In UTC: a date has no time zone, and a browser's own would
  // move it a day back west of Greenwich.
  function asDate(text) {
    const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
    if (!match) return null;
    const date = new Date(Date.UTC(+match[1], +match[2] - 1, +match[3]));
    if (date.getUTCMonth() !== +match[2] - 1 || date.getUTCDate() !== +match[3]) return null;
    try {
      return new Intl.DateTimeFormat(document.documentElement.lang || undefined,
        { dateStyle: 'long', timeZone: 'UTC' }).format(date);
    } catch (_) {
      return null;
    }
  }

  // The claims' labels in the page's language (docs/translations.md):
  // lanyard's own, and the relying party's from its brand, which win.
  let LABELS = {};
  try {
    LABELS = JSON.parse(($('labels') || {}).textContent || '{}') || {};
  } catch (_) {
    LABELS = {};
  }

  // A claim's name as a person reads it: its label, age_over_NN's for
  // any NN, a part's label under its claim (address's postal_code), else
  // a top-level key with its underscores as spaces and a capital first
  // letter. Other nested names show as they are.
  function label(name, depth, parent) {
    const own = depth === 0 ? name : parent + '-' + name;
    if ((depth === 0 || parent) && Object.prototype.hasOwnProperty.call(LABELS, own) &&
      typeof LABELS[own] === 'string') return LABELS[own];
    const age = depth === 0 ? /^age_over_(\d{1,3})$/.exec(name) : null;
    if (age && MESSAGES['claim-age_over']) return t('claim-age_over', { age: Number(age[1]) });
    if (depth !== 0 || !/^[a-z][a-z0-9_]*$/.test(name)) return name;
    const words = name.replace(/_/g, ' ');
    return words.charAt(0).toUpperCase() + words.slice(1);
  }

  function claimList(list, rows, depth, parent) {
    list.classList.add('claims');
    list.replaceChildren(...rows.flatMap(([name, value]) =>
      [isolated('dt', visibleText(label(name, depth, parent))), entry('dd', value, depth, name)]));
    return list;
  }

  function showClaims(claims) {
    const rows = claims && typeof claims === 'object' && !Array.isArray(claims)
      ? Object.entries(claims) : [];
    claimList($('claims'), rows, 0);
    $('result').hidden = false;
    $('result').focus();
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  // Whether lanyard itself made this answer: its errors carry a
  // `lanyard-error` header. A 404 or 502 without one came from a load
  // balancer or a replica still starting (a deploy), and is retried.
  const fromLanyard = (response) => response.headers.has('lanyard-error');

  async function poll(mine, transactionId, expiresAt) {
    let wait = FIRST_POLL_MS;
    const url = base() + 'api/status?transactionId=' + encodeURIComponent(transactionId);
    for (;;) {
      // Past the session's lifetime the server answers `expired`; only
      // when it cannot be reached does the page end the session itself.
      const left = expiresAt + EXPIRY_SLACK_MS - Date.now();
      if (left <= 0) {
        finish(t('expired'), false);
        return;
      }
      // The first poll after the lifetime comes just after it, so the
      // server's `expired` ends the page on time.
      const toExpiry = expiresAt - Date.now();
      await sleep(toExpiry > 0 ? Math.min(wait, toExpiry + 250) : Math.min(wait, left));
      if (mine !== run) return;
      wait = Math.min(MAX_POLL_MS, Math.round(wait * 1.5));
      let response;
      try {
        response = await fetch(url, { cache: 'no-store', credentials: 'same-origin' });
      } catch (_) {
        say(t('unreachable-retrying'));
        continue;
      }
      if (mine !== run) return;
      if (response.status >= 500 || response.status === 429 || !fromLanyard(response) && !response.ok) {
        say(fromLanyard(response) ? t('retrying', { code: (await failure(response)).code })
          : t('busy-retrying'));
        continue;
      }
      if (response.status === 404) {
        // lanyard's own: no replica knows this session for this browser
        // (its key rotated out, or the cookie is gone).
        finish(t('session-unknown'), true);
        return;
      }
      if (!response.ok) {
        finishFailed(await failure(response));
        return;
      }
      const body = await jsonOf(response, keepNumberText);
      if (!body) {
        // lanyard's answers are JSON: this one is not lanyard's.
        say(t('busy-retrying'));
        continue;
      }
      // The client's registered redirect URI; never a scheme that would
      // run or render something in this page's place.
      if (authorization() && typeof body.redirect === 'string' && /^[a-z][a-z0-9+.-]*:/i.test(body.redirect) &&
        !/^(javascript|data|vbscript|blob|file):/i.test(body.redirect)) {
        returnTo(body);
        return;
      }
      switch (body.status) {
        case 'verified':
          finish(t('verified'), false);
          showClaims(body.claims);
          return;
        case 'declined':
          finish(t('declined'), false);
          return;
        case 'expired':
          finish(t('expired'), false);
          return;
        case 'failed':
          finish(failedMessage(body) || t('failed'), true);
          return;
        default:
          // Still pending.
          break;
      }
    }
  }

  // A login's session ended: lanyard says where the browser goes next,
  // the application's address with the result (a code, or why not). The
  // claims went to the application's server, not to this page.
  function returnTo(body) {
    const known = ['verified', 'declined', 'expired'].includes(body.status);
    finish(t(known ? 'return-' + body.status : 'return-failed'), false);
    $('restart').hidden = true;
    window.location.assign(body.redirect);
  }

  async function start() {
    const mine = ++run;
    reset();
    $('start').disabled = true;
    say(t('starting'));
    let response;
    try {
      const login = authorization();
      const query = login ? '?authorization=' + encodeURIComponent(login) : '';
      response = await fetch(base() + 'api/start' + query, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
        cache: 'no-store',
        credentials: 'same-origin',
      });
    } catch (_) {
      $('start').disabled = false;
      finish(t('unreachable-start'), true);
      return;
    }
    $('start').disabled = false;
    if (mine !== run) return;
    if (!response.ok) {
      finishFailed(await failure(response));
      return;
    }
    const session = await jsonOf(response);
    if (!session) {
      finish(t('unreadable'), true);
      return;
    }
    $('start').hidden = true;
    const expiresAt = Date.now() + session.expires_in * 1000;
    keep(session, expiresAt);
    present(session);
    poll(mine, session.transaction_id, expiresAt);
  }

  // The language switch keeps what the page was asked with and only
  // changes the language. A login's page comes with its switch carrying
  // the login's request, sealed: the page may have been posted, and then
  // its URL has none.
  function switchKeepsTheRequest() {
    if (authorization()) return;
    for (const link of document.querySelectorAll('nav.languages a[hreflang]')) {
      const url = new URL(location.href);
      url.searchParams.set('lang', link.getAttribute('hreflang'));
      link.href = url.pathname + url.search;
    }
  }

  document.addEventListener('DOMContentLoaded', function () {
    switchKeepsTheRequest();
    // Back from the language switch: the session goes on.
    const resumed = kept();
    if (resumed) {
      $('start').hidden = true;
      present(resumed.session);
      poll(++run, resumed.session.transaction_id, resumed.expiresAt);
    }
    $('start').addEventListener('click', start);
    $('restart').addEventListener('click', start);
    $('toggle-qr').addEventListener('click', function () {
      setQrVisible($('qr-panel').hidden);
    });
  });
})();
