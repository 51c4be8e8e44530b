-- A small forum: the sample application a dataset receiver is installed into (samples/forum/README.md).
CREATE TABLE users (
    id bigserial PRIMARY KEY,
    handle text NOT NULL UNIQUE,
    email text NOT NULL UNIQUE,
    display_name text NOT NULL,
    bio text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE communities (
    id bigserial PRIMARY KEY,
    name text NOT NULL UNIQUE
);
CREATE TABLE memberships (
    id bigserial PRIMARY KEY,
    user_id bigint NOT NULL REFERENCES users (id),
    community_id bigint NOT NULL REFERENCES communities (id),
    role text NOT NULL CHECK (role IN ('participant', 'former_participant', 'moderator')),
    UNIQUE (user_id, community_id)
);
CREATE INDEX memberships_community ON memberships (community_id);
CREATE TABLE posts (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id),
    author_id bigint NOT NULL REFERENCES users (id),
    title text NOT NULL,
    body text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX posts_author ON posts (author_id, community_id);
CREATE INDEX posts_community ON posts (community_id);
CREATE TABLE comments (
    id bigserial PRIMARY KEY,
    post_id bigint NOT NULL REFERENCES posts (id) ON DELETE CASCADE,
    author_id bigint NOT NULL REFERENCES users (id),
    body text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX comments_author ON comments (author_id);
CREATE INDEX comments_post ON comments (post_id);
CREATE TABLE attachments (
    id bigserial PRIMARY KEY,
    comment_id bigint NOT NULL REFERENCES comments (id) ON DELETE CASCADE,
    filename text NOT NULL,
    bytes integer NOT NULL
);
CREATE INDEX attachments_comment ON attachments (comment_id);
