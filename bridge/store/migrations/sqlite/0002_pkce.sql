-- PKCE (RFC 7636): the S256 challenge an authorization code was issued
-- for; '' when the client sent none.
ALTER TABLE codes ADD COLUMN code_challenge TEXT NOT NULL DEFAULT '';
