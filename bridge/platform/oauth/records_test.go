package oauth_test

import (
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// records is the platform's records in the database an Open returned.
func records(db *store.DB, err error) (*accounts.Store, error) {
	if err != nil {
		return nil, err
	}
	return accounts.New(db), nil
}
