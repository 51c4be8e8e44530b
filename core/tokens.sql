-- Personal tokens' writes: issued with a digest only, used (last-used set), revoked once.

-- name: issue
INSERT INTO core_api_tokens (user_id, name, scope, prefix, digest, created_at, expires_at)
VALUES (%(user)s, %(label)s, %(scope)s, %(prefix)s, %(digest)s, %(now)s, %(expires)s)
RETURNING id

-- name: use
-- A live token of an active user, marked used; no row when it is unknown, revoked or expired.
UPDATE core_api_tokens t SET last_used_at = %(now)s
FROM auth_user u
WHERE t.digest = %(digest)s AND t.revoked_at IS NULL AND t.expires_at > %(now)s AND u.id = t.user_id AND u.is_active
RETURNING t.id, t.user_id, t.scope, t.name

-- name: revoke
UPDATE core_api_tokens SET revoked_at = %(now)s
WHERE id = %(id)s AND revoked_at IS NULL
RETURNING id
