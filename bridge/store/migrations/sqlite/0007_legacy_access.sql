-- A cached grant carries whether its app is legacy (tokens in the query
-- string): turning legacy off must end that at the next request, like any
-- other change that takes access away.
CREATE TRIGGER access_app_legacy AFTER UPDATE OF legacy ON apps
BEGIN UPDATE access_generation SET n = n + 1 WHERE id = 1; END;
