"""SCIM 2.0 provisioning (docs/scim.md), driven by the requests an Okta and an
Entra ID provisioning run send, replayed from their documented examples
(Okta's "SCIM 2.0 protocol reference" and Microsoft's "Tutorial: Develop and
plan provisioning for a SCIM endpoint"): a user is created, found by filter,
updated, deactivated and deleted; a group is created, gets and loses members,
and is deleted; a group mapped to a role gives its members that role. A
deactivated user's key gets 401 within a second."""

import time

import httpx

SCIM_JSON = "application/scim+json"
PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
USER = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"


def rpc(stack, key, method, params):
    reply = httpx.post(f"{stack.url}/a2a", headers={"Authorization": f"Bearer {key}", "A2A-Version": "1.0"},
                       json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).json()
    assert "error" not in reply, reply
    return reply["result"]


def owner(stack, email):
    """A workspace of its own, owned by a new user, on a plan with seats to spare."""
    account = httpx.post(f"{stack.url}/a2a", headers={"A2A-Version": "1.0"}, json={
        "jsonrpc": "2.0", "id": 1, "method": "accounts/signup", "params": {"name": "Owner", "email": email}}).json()
    return account["result"]


class Scim:
    def __init__(self, stack, token):
        self.http = httpx.Client(base_url=f"{stack.url}/scim/v2",
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": SCIM_JSON,
                                          "Accept": SCIM_JSON})

    def __getattr__(self, verb):
        return getattr(self.http, verb)


def role_of(stack, key, workspace_id, user_id):
    members = rpc(stack, key, "members/list", {"workspace_id": workspace_id})["members"]
    return next((m["role"] for m in members if m["user_id"] == user_id), None)


def chat(stack, key):
    return httpx.post(f"{stack.url}/v1/chat/completions", headers={"Authorization": f"Bearer {key}"},
                      json={"model": "acme/small", "messages": [{"role": "user", "content": "hi"}]})


def test_okta_provisions_updates_and_deprovisions_a_user_whose_key_then_fails(stack):
    boss = owner(stack, "boss@okta-corp.example")
    stack.admin("credit", "--workspace", boss["workspace_id"], "--usd", "1")
    token = rpc(stack, boss["api_key"], "scim/tokens.create",
                {"group_roles": {"Tollgate Admins": "admin"}, "default_role": "developer"})
    assert token["token"].startswith("tg_scim_")
    scim = Scim(stack, token["token"])

    # Okta: does the user exist? (startIndex and count as Okta sends them)
    found = scim.get("/Users", params={"filter": 'userName eq "test.user@okta-corp.example"',
                                       "startIndex": 1, "count": 100})
    assert found.status_code == 200 and found.headers["content-type"].startswith(SCIM_JSON)
    assert found.json()["totalResults"] == 0
    # The user signed up on their own before; provisioning adds them to this workspace.
    member = owner(stack, "test.user@okta-corp.example")

    created = scim.post("/Users", json={
        "schemas": [USER], "userName": "test.user@okta-corp.example",
        "name": {"givenName": "Test", "familyName": "User"},
        "emails": [{"primary": True, "value": "test.user@okta-corp.example", "type": "work"}],
        "displayName": "Test User", "locale": "en-US", "externalId": "00ujl29u0le5T6Aj10h7",
        "groups": [], "password": "1mz050nq", "active": True})
    assert created.status_code == 201, created.text
    user = created.json()
    assert user["id"] == member["user_id"] and user["active"] is True
    assert "password" not in user
    assert role_of(stack, boss["api_key"], boss["workspace_id"], user["id"]) == "developer"
    again = scim.post("/Users", json={"schemas": [USER], "userName": "test.user@okta-corp.example", "active": True})
    assert again.status_code == 409 and again.json()["scimType"] == "uniqueness"

    found = scim.get("/Users", params={"filter": 'userName eq "test.user@okta-corp.example"'}).json()
    assert found["totalResults"] == 1 and found["Resources"][0]["id"] == user["id"]
    assert scim.get(f"/Users/{user['id']}").json()["externalId"] == "00ujl29u0le5T6Aj10h7"

    # The member makes a key in the workspace, and it works.
    key = rpc(stack, member["api_key"], "keys/create", {"workspace_id": boss["workspace_id"], "name": "laptop"})
    assert chat(stack, key["api_key"]).status_code == 200

    # Okta: update the profile with PUT.
    put = scim.put(f"/Users/{user['id']}", json={
        "schemas": [USER], "id": user["id"], "userName": "test.user@okta-corp.example",
        "name": {"givenName": "Another", "familyName": "User"},
        "emails": [{"primary": True, "value": "test.user@okta-corp.example", "type": "work"}],
        "displayName": "Another User", "externalId": "00ujl29u0le5T6Aj10h7", "active": True})
    assert put.status_code == 200 and put.json()["name"]["givenName"] == "Another"

    # Okta: a group mapped to admin; pushing the user into it makes them admin.
    group = scim.post("/Groups", json={"schemas": [GROUP], "displayName": "Tollgate Admins", "members": []})
    assert group.status_code == 201, group.text
    group_id = group.json()["id"]
    added = scim.patch(f"/Groups/{group_id}", json={"schemas": [PATCH], "Operations": [
        {"op": "add", "path": "members", "value": [{"value": user["id"], "display": "test.user@okta-corp.example"}]}]})
    assert added.status_code == 200, added.text
    assert role_of(stack, boss["api_key"], boss["workspace_id"], user["id"]) == "admin"
    renamed = scim.patch(f"/Groups/{group_id}", json={"schemas": [PATCH], "Operations": [
        {"op": "replace", "value": {"id": group_id, "displayName": "Tollgate Admins"}}]})
    assert renamed.status_code == 200, renamed.text
    removed = scim.patch(f"/Groups/{group_id}", json={"schemas": [PATCH], "Operations": [
        {"op": "remove", "path": f'members[value eq "{user["id"]}"]'}]})
    assert removed.status_code == 200 and removed.json()["members"] == []
    assert role_of(stack, boss["api_key"], boss["workspace_id"], user["id"]) == "developer"

    # Okta: deactivate. The member's key stops working within a second.
    deactivated = scim.patch(f"/Users/{user['id']}", json={"schemas": [PATCH],
                                                          "Operations": [{"op": "replace", "value": {"active": False}}]})
    assert deactivated.status_code == 200 and deactivated.json()["active"] is False
    started = time.monotonic()
    while chat(stack, key["api_key"]).status_code != 401:
        assert time.monotonic() - started < 1.0, "the deactivated user's key still works after a second"
        time.sleep(0.05)
    assert role_of(stack, boss["api_key"], boss["workspace_id"], user["id"]) is None
    # Their own workspace is untouched.
    assert chat(stack, member["api_key"]).status_code in (200, 402)

    # Reactivated, they are a member again (a new key is needed: the old one was the membership's).
    reactivated = scim.patch(f"/Users/{user['id']}", json={"schemas": [PATCH],
                                                          "Operations": [{"op": "replace", "value": {"active": True}}]})
    assert reactivated.json()["active"] is True
    assert role_of(stack, boss["api_key"], boss["workspace_id"], user["id"]) == "developer"

    assert scim.delete(f"/Groups/{group_id}").status_code == 204
    assert scim.delete(f"/Users/{user['id']}").status_code == 204
    assert scim.get(f"/Users/{user['id']}").status_code == 404
    assert role_of(stack, boss["api_key"], boss["workspace_id"], user["id"]) is None

    # The audit log names the provisioner (the token) for each change.
    audit = rpc(stack, boss["api_key"], "audit/list", {"op": "scim.users.patch"})["entries"]
    assert audit and all(row["actor"]["kind"] == "provisioner" and row["actor"]["key_id"] == token["token_id"]
                         for row in audit)
    # A revoked token is refused at once.
    rpc(stack, boss["api_key"], "scim/tokens.revoke", {"token_id": token["token_id"]})
    assert scim.get("/Users").status_code == 401


def test_entra_id_provisioning_run(stack):
    boss = owner(stack, "boss@entra-corp.example")
    token = rpc(stack, boss["api_key"], "scim/tokens.create", {"group_roles": {"Readers": "viewer"}})
    scim = Scim(stack, token["token"])
    assert scim.get("/ServiceProviderConfig").json()["patch"]["supported"] is True

    # Entra ID: look up by userName, then create with the enterprise extension.
    assert scim.get("/Users", params={"filter": 'userName eq "Test_User@entra-corp.example"'}).json()["totalResults"] == 0
    created = scim.post("/Users", json={
        "schemas": [USER, "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"],
        "externalId": "0a21f0f2-8d2a-4f8e-bf98-7363c4aed4ef", "userName": "Test_User@entra-corp.example",
        "active": True, "displayName": "Test User",
        "emails": [{"primary": True, "type": "work", "value": "Test_User@entra-corp.example"}],
        "meta": {"resourceType": "User"},
        "name": {"formatted": "givenName familyName", "familyName": "familyName", "givenName": "givenName"},
        "roles": [],
        "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User": {"employeeNumber": "1", "department": "Eng"}})
    assert created.status_code == 201, created.text
    user = created.json()
    assert user["userName"] == "test_user@entra-corp.example"
    by_external = scim.get("/Users", params={"filter": 'externalId eq "0a21f0f2-8d2a-4f8e-bf98-7363c4aed4ef"'}).json()
    assert by_external["Resources"][0]["id"] == user["id"]

    # Entra ID: attribute updates, some of attributes the gateway does not keep.
    patched = scim.patch(f"/Users/{user['id']}", json={"schemas": [PATCH], "Operations": [
        {"op": "Replace", "path": "displayName", "value": "Renamed User"},
        {"op": "Add", "path": "emails[type eq \"work\"].value", "value": "Test_User@entra-corp.example"},
        {"op": "Replace", "path": "name.familyName", "value": "Renamed"},
        {"op": "Add", "path": "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:employeeNumber",
         "value": "2"}]})
    assert patched.status_code == 200, patched.text
    assert patched.json()["displayName"] == "Renamed User" and patched.json()["name"]["familyName"] == "Renamed"

    # Entra ID: a group, members added and removed as it sends them.
    group = scim.post("/Groups", json={"externalId": "8aa1a0c0-c4c3-4bc0-b4a5-2ef676900159", "displayName": "Readers",
                                       "meta": {"resourceType": "Group"}, "members": [],
                                       "schemas": [GROUP]}).json()
    lookup = scim.get("/Groups", params={"excludedAttributes": "members",
                                         "filter": 'displayName eq "Readers"'}).json()
    assert lookup["totalResults"] == 1 and "members" not in lookup["Resources"][0]
    scim.patch(f"/Groups/{group['id']}", json={"schemas": [PATCH], "Operations": [
        {"op": "Add", "path": "members", "value": [{"$ref": None, "value": user["id"]}]}]})
    assert role_of(stack, boss["api_key"], boss["workspace_id"], user["id"]) == "viewer"
    scim.patch(f"/Groups/{group['id']}", json={"schemas": [PATCH], "Operations": [
        {"op": "Remove", "path": "members", "value": [{"$ref": None, "value": user["id"]}]}]})
    assert role_of(stack, boss["api_key"], boss["workspace_id"], user["id"]) == "developer"

    # Entra ID: disable, then delete.
    disabled = scim.patch(f"/Users/{user['id']}", json={"schemas": [PATCH], "Operations": [
        {"op": "Replace", "path": "active", "value": "False"}]})
    assert disabled.json()["active"] is False
    assert role_of(stack, boss["api_key"], boss["workspace_id"], user["id"]) is None
    assert scim.delete(f"/Users/{user['id']}").status_code == 204

    # Bad input gets SCIM errors; another workspace's token sees nothing here.
    bad = scim.post("/Users", json={"schemas": [USER], "userName": "not an address"})
    assert bad.status_code == 400 and bad.json()["schemas"] == ["urn:ietf:params:scim:api:messages:2.0:Error"]
    assert scim.get("/Users", params={"filter": 'userName sw "a"'}).json()["scimType"] == "invalidFilter"
    other = owner(stack, "other@entra-corp.example")
    foreign = Scim(stack, rpc(stack, other["api_key"], "scim/tokens.create", {})["token"])
    assert foreign.get(f"/Groups/{group['id']}").status_code == 404
    assert Scim(stack, "tg_scim_forged").get("/Users").status_code == 401
    # A group is bounded before anything is read or stored.
    huge = scim.post("/Groups", json={"schemas": [GROUP], "displayName": "Everyone",
                                      "members": [{"value": f"user_{i}"} for i in range(10_001)]})
    assert huge.status_code == 400 and "at most 10000 members" in huge.json()["detail"], huge.text
    assert scim.get("/Groups", params={"filter": 'displayName eq "Everyone"'}).json()["totalResults"] == 0
