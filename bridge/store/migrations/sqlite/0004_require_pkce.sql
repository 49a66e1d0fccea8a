-- PKCE-only apps (app create --require-pkce): their authorization requests
-- must carry an S256 code_challenge, and their codes a code_verifier.
ALTER TABLE apps ADD COLUMN require_pkce INTEGER NOT NULL DEFAULT 0;
