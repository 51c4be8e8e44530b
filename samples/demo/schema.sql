-- The demo application: the people a newcomer deletes in `make run` and the suite's `demo:` people,
-- served by the dataset receiver (dataset.yaml) like any organisation's database.
CREATE TABLE people (
    id bigserial PRIMARY KEY,
    handle text NOT NULL UNIQUE CHECK (char_length(handle) BETWEEN 1 AND 210),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE communities (
    id uuid PRIMARY KEY,
    name text NOT NULL
);
CREATE TABLE memberships (
    id bigserial PRIMARY KEY,
    person_id bigint NOT NULL REFERENCES people (id),
    community_id uuid NOT NULL REFERENCES communities (id),
    role text NOT NULL CHECK (role IN ('participant', 'former_participant')),
    UNIQUE (person_id, community_id)
);
CREATE INDEX memberships_community ON memberships (community_id);
CREATE TABLE posts (
    id bigserial PRIMARY KEY,
    person_id bigint NOT NULL REFERENCES people (id),
    community_id uuid NOT NULL REFERENCES communities (id),
    body text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX posts_person ON posts (person_id, community_id);
CREATE INDEX posts_community ON posts (community_id);
CREATE TABLE agents (
    id bigserial PRIMARY KEY,
    person_id bigint NOT NULL REFERENCES people (id),
    community_id uuid NOT NULL REFERENCES communities (id),
    name text NOT NULL
);
CREATE INDEX agents_person ON agents (person_id, community_id);
CREATE INDEX agents_community ON agents (community_id);
