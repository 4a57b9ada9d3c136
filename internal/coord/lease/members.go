package lease

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/cosmosloader/loader/internal/coord"
)

// membersDir holds one heartbeat blob per process that wants partitions,
// named by its lease ID, with how many it wants in its metadata.
const membersDir = "members/"

// rosterDir holds copies of the last listing of the heartbeats, for a
// fleet too large for every process to list them (see readMembers).
const rosterDir = "roster/"

const (
	metaWant     = "want"
	metaReserved = "reserved"
	// metaHolder, on a partition blob, is the lease ID of the process that
	// labelled it under its lease: the name of its heartbeat blob.
	metaHolder = "holder"
)

// The heartbeat's timing, apart from the lease duration: one small blob
// write per process every half second. A process counts its partitions for
// heartbeatFresh after sending its last acknowledged heartbeat, so a write
// may be up to a second late before its capacity lapses; a heartbeat that
// looks heartbeatDead old, by the server's clock, means its process spends
// nothing (breakable has the margin). A killed loader's partitions are
// taken over 2–3.5 s after its last heartbeat (plus a roster's age in a
// large fleet): every second of that is a share of the target unspent.
const (
	heartbeatEvery = 500 * time.Millisecond
	heartbeatFresh = 1500 * time.Millisecond
	heartbeatDead  = 3 * time.Second
)

// heartbeatDrain is what breakable's margin leaves, beyond Last-Modified's
// one-second resolution, between a holder's capacity ceasing to count and
// another process counting it: Run's ticker drops the limit within a
// quarter of a heartbeat period, and requests already sent reach the
// service within a one-way trip.
const heartbeatDrain = heartbeatDead - heartbeatFresh - time.Second

// reserveAfter is how long after its heartbeat became fresh a process
// starts spending its reserve: the others learn of its heartbeat within a
// heartbeat period (a listing, or a roster a period old), and then their
// limits drop and their requests land within heartbeatDrain
// (reserveLocked).
const reserveAfter = heartbeatEvery + heartbeatDrain

// A fleet of at most rosterFrom processes lists the heartbeats on every
// heartbeat, as each process needs to know them: but listing N heartbeats
// N times a period grows with the square of the fleet. A larger fleet
// takes turns: each process lists on one heartbeat in ceil(N ÷
// rosterListers), so about rosterListers listings are made each period
// whatever N, and writes what it listed to the roster; on its other
// heartbeats it reads a copy of the roster, one small blob. The roster is
// kept in one copy per rosterReadersPerCopy processes, so that no one blob
// is read more than a few hundred times a second (Azure's target for a
// single blob is 500 requests a second). docs/fleet.md has
// the arithmetic.
const (
	rosterFrom           = 8
	rosterListers        = 2
	rosterReadersPerCopy = 100
	// rosterStaleReads roster reads in a row older than rosterStale make
	// a reader list the heartbeats itself: its listers have gone.
	rosterStaleReads = 3
	rosterStale      = 4 * heartbeatEvery
)

// member is one live heartbeat as listed.
type member struct {
	id       string // the process's lease ID
	want     int
	reserved float64
}

// roster is one listing of the heartbeats: every process whose heartbeat
// was younger than heartbeatDead at date (the server's time of the
// listing), by lease ID.
type roster struct {
	date    time.Time
	members []member // sorted by id
	// block is members as the roster blob has them, to tell an unchanged
	// roster without parsing it.
	block []byte
}

// alive reports whether id's heartbeat was live at the listing.
func (r *roster) alive(id string) bool {
	i := sort.Search(len(r.members), func(i int) bool { return r.members[i].id >= id })
	return i < len(r.members) && r.members[i].id == id
}

// listEvery is how many heartbeats apart a process lists the heartbeats
// itself in a fleet of n.
func listEvery(n int) int {
	if n <= rosterFrom {
		return 1
	}
	return (n + rosterListers - 1) / rosterListers
}

// rosterCopies is how many copies of the roster a fleet of n keeps.
func rosterCopies(n int) int {
	return max(1, (n+rosterReadersPerCopy-1)/rosterReadersPerCopy)
}

// Beat is one pass of the heartbeat loop: publish how many partitions this
// process wants, learn what every live process wants, work out the fair
// share, and wake the lease loop when that asks for a change. It returns
// how long to wait before the next pass (see Step). A storage error drops
// the leased capacity at once, as in a round.
func (c *Capacity) Beat(ctx context.Context) time.Duration {
	relabel, err := c.heartbeat(ctx)
	if ctx.Err() != nil {
		return 0
	}
	if err != nil {
		c.storageDown(err)
		c.notify()
		return c.beatEvery
	}
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	change := decide(c.demand, c.cfg.ReservedRU, c.per, len(c.held), c.cfg.Partitions, c.share)
	wait := c.beatEvery
	if c.beatOn {
		wait = max(c.beat.Add(c.beatEvery).Sub(now), 10*time.Millisecond)
	}
	c.mu.Unlock()
	if relabel || change != 0 {
		poke(c.wake)
	}
	c.notify()
	return wait
}

// heartbeat publishes how many partitions this process wants and learns
// what every live process wants, to work out this process's fair share:
// without it the first process to start would hold every partition for as
// long as it had work. A process's heartbeat counts for deadAfter; by then
// a dead process's partitions have stopped counting and the others break
// their leases. It reports whether a gap in this process's heartbeat just
// ended while it holds partitions, which must then be labelled anew.
func (c *Capacity) heartbeat(ctx context.Context) (relabel bool, err error) {
	if err := c.ensureContainer(ctx); err != nil {
		return false, err
	}
	c.mu.Lock()
	want := wanted(c.demand, c.cfg.ReservedRU, c.per, c.cfg.Partitions)
	on := c.beatOn
	// A process spending only its reserved capacity still announces it, so
	// that the others carve it out of the target.
	// And so does one still holding partitions: they count only while its
	// heartbeat is fresh.
	present := want > 0 || len(c.held) > 0 || (c.demand > 0 && c.cfg.ReservedRU > 0)
	c.mu.Unlock()

	// No request outlives the freshness it could still give.
	rctx, cancel := context.WithTimeout(ctx, c.freshFor)
	defer cancel()
	if !present {
		if on {
			_, err := c.member.Delete(rctx, nil)
			if err != nil && !bloberror.HasCode(err, bloberror.BlobNotFound) {
				return false, fmt.Errorf("delete capacity heartbeat: %w", err)
			}
		}
		c.mu.Lock()
		c.beatWant, c.beatOn, c.share = 0, false, c.cfg.Partitions
		c.beat = time.Time{}
		c.mu.Unlock()
		return false, nil
	}
	w := strconv.Itoa(want)
	r := strconv.FormatFloat(c.cfg.ReservedRU, 'f', -1, 64)
	sent := c.cfg.Clock.Now()
	if c.beforeUpload != nil {
		c.beforeUpload()
	}
	_, err = c.member.Upload(rctx, coord.Body(nil), &blockblob.UploadOptions{
		Metadata: map[string]*string{metaWant: &w, metaReserved: &r},
	})
	if err != nil {
		return false, fmt.Errorf("write capacity heartbeat: %w", err)
	}
	acked := c.cfg.Clock.Now()
	c.mu.Lock()
	if c.beat.IsZero() || acked.Sub(c.beat) >= c.freshFor {
		// A gap: partitions labelled before it no longer count.
		c.streak = acked
		relabel = len(c.held) > 0
	}
	c.beat, c.beatWant, c.beatOn = sent, want, true
	if c.comeback {
		// Storage answers again: c.fleet and c.members are still the
		// fleet's before it went out of reach.
		c.comeback = false
		c.comebackAt = acked.Add(comebackDelay(c.cfg.Rand, c.fleet))
		c.comebackMembers = c.members
	}
	c.mu.Unlock()

	ro, err := c.readMembers(rctx)
	if err != nil {
		return relabel, err
	}
	c.apply(ro, want)
	return relabel, nil
}

// readMembers returns the live heartbeats: listed, on this process's turn
// or while the fleet is small, else read from the roster.
func (c *Capacity) readMembers(ctx context.Context) (*roster, error) {
	c.mu.Lock()
	n, pass, stale, known := c.fleet, c.passes, c.staleReads, c.roster
	c.passes++
	c.mu.Unlock()
	every := listEvery(n)
	if every == 1 || known == nil || stale >= rosterStaleReads || (pass+c.phase)%every == 0 {
		ro, err := c.listMembers(ctx)
		if err != nil {
			return nil, err
		}
		if len(ro.members) > rosterFrom {
			if err := c.writeRoster(ctx, ro); err != nil {
				return nil, err
			}
		}
		c.mu.Lock()
		c.staleReads = 0
		c.mu.Unlock()
		return ro, nil
	}
	ro, served, err := c.readRoster(ctx, known)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if ro == nil || served.Sub(ro.date) > rosterStale {
		c.staleReads++
	} else {
		c.staleReads = 0
	}
	c.mu.Unlock()
	if ro == nil || ro.date.Before(known.date) {
		// Missing (the fleet shrank and its copy is gone) or older than
		// what this process knows: keep what it knows.
		return known, nil
	}
	return ro, nil
}

// listMembers lists the heartbeats, deleting those of processes long
// dead.
func (c *Capacity) listMembers(ctx context.Context) (*roster, error) {
	prefix := c.cfg.Prefix + membersDir
	pager := c.cfg.Container.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{
		Prefix:  &prefix,
		Include: container.ListBlobsInclude{Metadata: true},
	})
	stale := map[string]azcore.ETag{}
	ro := &roster{}
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list capacity heartbeats: %w", err)
		}
		// Judge age by the server's clock alone: ours may be skewed.
		serverNow := c.cfg.Clock.Now()
		if page.Date != nil {
			serverNow = *page.Date
		}
		if ro.date.IsZero() {
			ro.date = serverNow
		}
		for _, b := range page.Segment.BlobItems {
			if b.Name == nil || b.Properties == nil || b.Properties.LastModified == nil {
				continue
			}
			age := serverNow.Sub(*b.Properties.LastModified)
			if age > 4*c.cfg.LeaseDuration && b.Properties.ETag != nil {
				stale[*b.Name] = *b.Properties.ETag
			}
			// A live process rewrites its heartbeat every beatEvery; one
			// that looks deadAfter old (whole seconds: more than deadAfter
			// − 1 s) means it spends nothing, so the others raise their
			// share and break its leases.
			if age >= c.deadAfter {
				continue
			}
			m := member{id: strings.TrimPrefix(*b.Name, prefix)}
			for k, v := range b.Metadata {
				if v != nil && strings.EqualFold(k, metaWant) {
					if n, err := strconv.Atoi(*v); err == nil && n > 0 {
						m.want = n
					}
				}
				if v != nil && strings.EqualFold(k, metaReserved) {
					if r, err := strconv.ParseFloat(*v, 64); err == nil && r > 0 && !math.IsInf(r, 0) {
						m.reserved = r
					}
				}
			}
			ro.members = append(ro.members, m)
		}
	}
	// Listed in name order; a later page may start over a boundary.
	sort.Slice(ro.members, func(i, j int) bool { return ro.members[i].id < ro.members[j].id })
	// Dead processes' heartbeats would pile up forever. Only the one
	// listed: a process that came back and wrote a fresh heartbeat since
	// must not look absent, to the others' breakable, while it counts.
	for name, etag := range stale {
		c.cfg.Container.NewBlobClient(name).Delete(ctx, &blob.DeleteOptions{
			AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: &etag}},
		})
	}
	ro.block = encodeMembers(ro.members)
	return ro, nil
}

// The roster blob: a header line with the listing's server time (Unix
// seconds, as exact as Date) and the number of copies written, then one
// line per member: "id want reserved".
const rosterMagic = "loader-roster-1"

func encodeMembers(ms []member) []byte {
	var b bytes.Buffer
	for _, m := range ms {
		fmt.Fprintf(&b, "%s %d %s\n", m.id, m.want, strconv.FormatFloat(m.reserved, 'f', -1, 64))
	}
	return b.Bytes()
}

// writeRoster writes ro to every copy the fleet keeps, and deletes the
// copies a larger fleet kept before.
func (c *Capacity) writeRoster(ctx context.Context, ro *roster) error {
	copies := rosterCopies(len(ro.members))
	body := append([]byte(fmt.Sprintf("%s %d %d\n", rosterMagic, ro.date.Unix(), copies)), ro.block...)
	for i := range copies {
		_, err := c.cfg.Container.NewBlockBlobClient(c.rosterName(i)).Upload(ctx, coord.Body(body), nil)
		if err != nil {
			return fmt.Errorf("write capacity roster: %w", err)
		}
	}
	c.mu.Lock()
	was := c.rosterCopies
	c.rosterCopies = copies
	c.mu.Unlock()
	for i := copies; i < was; i++ {
		c.cfg.Container.NewBlobClient(c.rosterName(i)).Delete(ctx, nil)
	}
	return nil
}

func (c *Capacity) rosterName(idx int) string {
	return c.cfg.Prefix + rosterDir + strconv.Itoa(idx)
}

// readRoster reads this process's copy of the roster (copy 0 when its own
// is gone) and returns it with the server's time of the read; nil when
// there is none. An unchanged member list is not parsed again.
func (c *Capacity) readRoster(ctx context.Context, known *roster) (*roster, time.Time, error) {
	h := fnv.New32a()
	h.Write([]byte(c.id))
	idx := int(h.Sum32() % uint32(rosterCopies(len(known.members))))
	for {
		resp, err := c.cfg.Container.NewBlobClient(c.rosterName(idx)).DownloadStream(ctx, nil)
		if bloberror.HasCode(err, bloberror.BlobNotFound) && idx > 0 {
			idx = 0
			continue
		}
		if coord.HasStatus(err, http.StatusNotFound) {
			return nil, time.Time{}, nil
		}
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("read capacity roster: %w", err)
		}
		var buf bytes.Buffer
		_, err = buf.ReadFrom(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("read capacity roster: %w", err)
		}
		served := c.cfg.Clock.Now()
		if resp.Date != nil {
			served = *resp.Date
		}
		return parseRoster(buf.Bytes(), known), served, nil
	}
}

// parseRoster decodes a roster blob; one it cannot read is none. The
// member list of known is reused when the blob's is the same.
func parseRoster(b []byte, known *roster) *roster {
	head, block, ok := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(head))
	if !ok || len(f) != 3 || f[0] != rosterMagic {
		return nil
	}
	secs, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return nil
	}
	ro := &roster{date: time.Unix(secs, 0).UTC()}
	if known != nil && bytes.Equal(block, known.block) {
		ro.members, ro.block = known.members, known.block
		return ro
	}
	ro.block = slices.Clone(block)
	for line := range strings.SplitSeq(strings.TrimSuffix(string(block), "\n"), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		want, err1 := strconv.Atoi(f[1])
		reserved, err2 := strconv.ParseFloat(f[2], 64)
		if err1 != nil || err2 != nil || want < 0 || !(reserved >= 0) || math.IsInf(reserved, 0) {
			continue
		}
		ro.members = append(ro.members, member{id: f[0], want: want, reserved: reserved})
	}
	return ro
}

// apply works out this process's fair share, the reserved RU/s of the live
// processes, and which processes are alive, from ro and this process's own
// want.
func (c *Capacity) apply(ro *roster, want int) {
	wants := make([]int, 0, len(ro.members)+1)
	me, reserved := -1, c.cfg.ReservedRU
	for _, m := range ro.members {
		if m.id == c.id {
			continue
		}
		reserved += m.reserved
		if me < 0 && m.id > c.id {
			me = len(wants)
			wants = append(wants, want)
		}
		if m.want > 0 {
			wants = append(wants, m.want)
		}
	}
	if me < 0 {
		me = len(wants)
		wants = append(wants, want)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Just after an outage the heartbeats reappear over a heartbeat
	// period or two, and a share worked out from the first few would be
	// taken and given back moments later: until the fleet's heartbeats
	// have had the time to show, the processes not seen yet count as
	// wanting every partition.
	comingBack := c.cfg.Clock.Now().Before(c.comebackAt.Add(c.deadAfter))
	if comingBack {
		for range c.comebackMembers - len(wants) {
			wants = append(wants, c.cfg.Partitions)
		}
	}
	share := fairShare(wants, me, c.cfg.Partitions)
	if len(wants) != c.members {
		c.cfg.Logf("capacity: %d processes want partitions; this one's fair share is %d of %d", len(wants), share, c.cfg.Partitions)
	}
	c.share, c.members = share, len(wants)
	if gone := c.fleet - len(ro.members); gone > 0 && !comingBack {
		// Someone died or left (not the fleet reappearing after an
		// outage): what it held is to be found now. Many at once — a
		// twentieth of the fleet or more, a node or a zone lost — leave
		// their partitions scattered over every window, so the next
		// acquisition looks everywhere, in one listing (at most once a
		// renewal period: see acquire); loaders leaving one by one at the
		// end of a load release theirs, found window by window.
		c.short, c.nextAcquire = 0, time.Time{}
		if gone*20 >= c.fleet {
			c.short = 2
		}
	}
	c.fleet = len(ro.members)
	c.roster = ro
	c.beatDate = ro.date
	if reserved != c.reservedAll {
		c.reservedAll = reserved
		c.resizeLocked()
	}
}

// fairShare splits partitions among processes wanting wants[i] each, as
// handing them out one at a time round-robin in a fixed order would, and
// returns process self's part. Every process computes the same split from
// the same listing, so no one has to be in charge.
func fairShare(wants []int, self, partitions int) int {
	// After level full rounds everyone has min(want, level); the round
	// after it runs out part-way, in list order.
	given := func(level int) int {
		n := 0
		for _, w := range wants {
			n += min(w, level)
		}
		return n
	}
	level := sort.Search(partitions+1, func(l int) bool { return given(l) > partitions }) - 1
	left := partitions - given(level)
	for i, w := range wants {
		if w <= level {
			continue
		}
		if i == self {
			if left > 0 {
				return level + 1
			}
			return level
		}
		left--
	}
	return min(wants[self], level)
}
