package store

import (
	"encoding/binary"
	"fmt"

	"go.etcd.io/bbolt"
)

// The event history's place in the bolt file (see Bolt.AppendEvents). The bucket is
// created by the first write: a file without it is a store with no history, and a release
// that does not know it leaves it alone (it is not part of the checked format).
var (
	bucketEvents       = []byte("events")
	metaEventsReserved = []byte("events-reserved")
)

// StoredEvent is one event of the gateway's history: its id and its JSON.
type StoredEvent struct {
	ID   uint64
	JSON []byte
}

// AppendEvents stores events (ids increasing), keeps only those with an id above the
// last id minus keep, and records reserved, the id below which the gateway has handed
// ids out (so a restart never reuses one that was not stored), in one committed
// transaction.
func (b *Bolt) AppendEvents(events []StoredEvent, reserved uint64, keep int) error {
	err := b.db.Update(func(tx *bbolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(bucketEvents)
		if err != nil {
			return err
		}
		bk.FillPercent = 0.9 // ids grow: inserts land at the end
		var last uint64
		for _, e := range events {
			if err := bk.Put(eventKey(e.ID), e.JSON); err != nil {
				return err
			}
			last = max(last, e.ID)
		}
		if last > uint64(keep) {
			floor := eventKey(last - uint64(keep) + 1)
			c := bk.Cursor()
			for k, _ := c.First(); k != nil && string(k) < string(floor); k, _ = c.First() {
				if err := c.Delete(); err != nil {
					return err
				}
			}
		}
		var r [8]byte
		binary.BigEndian.PutUint64(r[:], reserved)
		return tx.Bucket(bucketMeta).Put(metaEventsReserved, r[:])
	})
	if err != nil {
		return fmt.Errorf("store[bolt] path[%s]: event history: %w", b.path, err)
	}
	return nil
}

// LoadEvents returns the last max stored events, oldest first, and the reserved id mark
// (0 when the file holds no history).
func (b *Bolt) LoadEvents(max int) (events []StoredEvent, reserved uint64, err error) {
	err = b.db.View(func(tx *bbolt.Tx) error {
		if r := tx.Bucket(bucketMeta).Get(metaEventsReserved); len(r) == 8 {
			reserved = binary.BigEndian.Uint64(r)
		}
		bk := tx.Bucket(bucketEvents)
		if bk == nil {
			return nil
		}
		c := bk.Cursor()
		for k, v := c.Last(); k != nil && len(events) < max; k, v = c.Prev() {
			if len(k) != 8 {
				continue
			}
			events = append(events, StoredEvent{ID: binary.BigEndian.Uint64(k), JSON: append([]byte(nil), v...)})
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("store[bolt] path[%s]: event history: %w", b.path, err)
	}
	for i, j := 0, len(events)-1; i < j; i, j = i+1, j-1 {
		events[i], events[j] = events[j], events[i]
	}
	return events, reserved, nil
}

func eventKey(id uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], id)
	return k[:]
}
