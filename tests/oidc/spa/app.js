// A single-page app as its developer would write it with oidc-client-ts:
// a public client (PKCE, no secret) whose browser code alone signs the
// person in. On its page the button starts the login; back at its
// redirect URI (this same page with `code` in the query) it redeems the
// code at lanyard's token endpoint and calls userinfo, both from the
// browser (CORS), and shows what it got in #result, or why not in
// #error. tests/oidc/spa.mjs serves it and drives Chromium through it.

(async function () {
  const config = await (await fetch('/config.json')).json();
  const manager = new oidc.UserManager({
    authority: config.issuer,
    client_id: config.client_id,
    redirect_uri: config.redirect_uri,
    response_type: 'code',
    scope: 'openid',
    // oidc-client-ts calls userinfo itself and merges its claims.
    loadUserInfo: true,
  });

  function show(id, text) {
    const element = document.getElementById(id);
    element.textContent = text;
    element.hidden = false;
  }

  const query = new URLSearchParams(location.search);
  if (!query.has('code') && !query.has('error')) {
    const button = document.getElementById('sign-in');
    button.addEventListener('click', () => manager.signinRedirect().catch((err) => show('error', String(err))));
    button.disabled = false;
    return;
  }
  try {
    const user = await manager.signinRedirectCallback();
    // And the app's own call, as it would ask for the person's claims
    // later.
    const metadata = await manager.metadataService.getMetadata();
    const answer = await fetch(metadata.userinfo_endpoint, {
      headers: { authorization: `Bearer ${user.access_token}` },
    });
    show('result', JSON.stringify({
      profile: user.profile,
      token_type: user.token_type,
      expires_in: user.expires_in,
      has_id_token: typeof user.id_token === 'string',
      has_access_token: typeof user.access_token === 'string',
      userinfo_status: answer.status,
      userinfo: await answer.json(),
    }));
  } catch (err) {
    show('error', `${err?.name}: ${err?.message}`);
  }
})();
