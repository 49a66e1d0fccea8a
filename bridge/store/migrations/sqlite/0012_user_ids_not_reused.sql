-- A user id is never given twice. users.id is a plain INTEGER PRIMARY
-- KEY, and SQLite gives a new row the highest id plus one, so deleting the
-- newest user handed its id to the next user created: a login session, a
-- grant cached by user, or a hub's replica still naming the deleted user
-- would then have stood for the new one. New users take the id after the
-- highest ever given, kept here; the trigger refuses any other.
CREATE TABLE id_high_water (
    name  TEXT    PRIMARY KEY,
    value INTEGER NOT NULL
);
INSERT INTO id_high_water (name, value) SELECT 'users', coalesce(max(id), 0) FROM users;
CREATE TRIGGER users_id_not_reused AFTER INSERT ON users BEGIN
    SELECT RAISE(ABORT, 'a user id may not be given twice')
    WHERE NEW.id <= (SELECT value FROM id_high_water WHERE name = 'users');
    UPDATE id_high_water SET value = NEW.id WHERE name = 'users';
END;
