package pacing

import (
	"math"
	"sort"
	"sync"
)

// TermCost is the RU Cosmos DB charges per indexed term of a write, from the
// request-unit documentation (measured nearer 0.26; calibration finds the
// real figure for the container at hand).
const TermCost = 0.2

// WriteCostTable is Microsoft's published write cost by item size
// (understand-request-unit-consumption), before indexing, in ascending size.
// It is the one copy of the table: the cost model's prior and the local
// target's charges both come from it through SizeCost.
var WriteCostTable = []struct{ KB, RU float64 }{
	{1, 4.95}, {2, 6.29}, {4, 6.67}, {8, 7.04}, {16, 9.52}, {32, 11.23},
	{64, 22.67}, {128, 48.19}, {256, 98.29}, {512, 184.57}, {1024, 625}, {2048, 1250},
}

// SizeCost returns the RU of creating an item of the given encoded size,
// before indexing, by linear interpolation of WriteCostTable.
//
// Items under 1 KB cost the 1 KB figure: Cosmos DB meters storage I/O in
// whole kilobytes, so a 200-byte item is not cheaper than a 1 KB one (the
// same rule that makes every point read of a small item 1 RU). Beyond the
// table (2 MB, which the service rejects anyway) the last segment's slope is
// extended: that keeps the curve continuous and assumes only what the last
// two published points say, not that cost is proportional to size from zero.
func SizeCost(bytes int) float64 {
	t := WriteCostTable
	kb := float64(bytes) / 1024
	first, last := t[0], t[len(t)-1]
	if kb <= first.KB {
		return first.RU
	}
	if kb >= last.KB {
		prev := t[len(t)-2]
		return last.RU + (kb-last.KB)*(last.RU-prev.RU)/(last.KB-prev.KB)
	}
	i := sort.Search(len(t), func(i int) bool { return t[i].KB >= kb })
	lo, hi := t[i-1], t[i]
	return lo.RU + (kb-lo.KB)*(hi.RU-lo.RU)/(hi.KB-lo.KB)
}

// CostOptions configures a CostModel.
type CostOptions struct {
	// SafetyMargin inflates estimates until the model is calibrated, so an
	// uncalibrated run errs towards fewer 429s (e.g. 0.10).
	SafetyMargin float64
	// FixedCost, when > 0, is returned by every Estimate (--cost-per-record):
	// the user knows better than any model.
	FixedCost float64
	// Forgetting is the recursive-least-squares forgetting factor; 0 means
	// 0.999, an effective memory of about a thousand responses.
	Forgetting float64
}

// Calibration is a CostModel's learned state. It is JSON-serialisable so a
// checkpoint can carry it and a resumed run starts calibrated.
type Calibration struct {
	Version int `json:"version"`
	// Theta are the coefficients of [1, SizeCost(size), terms].
	Theta      [3]float64    `json:"theta"`
	Covariance [3][3]float64 `json:"covariance"`
	// Observations counts the responses learned from.
	Observations int64 `json:"observations"`
	// Residual is the running mean absolute relative error of predictions.
	Residual float64 `json:"residual"`
	// ReplaceRatio is how much more an upsert that replaced an existing
	// item was charged than a create.
	ReplaceRatio float64 `json:"replace_ratio"`
}

const (
	calibrationVersion = 1
	// warmup responses are learned from as they come, before outliers are
	// recognised: the prior may be off by 2× for a given container.
	warmup = 20
	// calibratedAfter responses and residualCalibrated relative error make
	// a model calibrated.
	calibratedAfter    = 50
	residualCalibrated = 0.10
	// replaceLow..replaceHigh × the prediction is read as an upsert that
	// replaced an existing item (documented as ≈ 2 × a create).
	replaceLow, replaceHigh = 1.5, 3.0
	// minEstimate keeps a degenerate fit from pricing writes at nothing.
	minEstimate = 1.0
	// maxTrace bounds the covariance: with forgetting, directions the data
	// never excites (every record the same size) would otherwise grow
	// without bound and make the next unusual record swing the fit.
	maxTrace = 1e4
)

// priorCalibration is the documented model: SizeCost + TermCost × terms.
func priorCalibration() Calibration {
	return Calibration{
		Version:      calibrationVersion,
		Theta:        [3]float64{0, 1, TermCost},
		Covariance:   [3][3]float64{{25, 0, 0}, {0, 1, 0}, {0, 0, 0.1}},
		Residual:     1,
		ReplaceRatio: 2,
	}
}

// CostModel estimates the RU charge of writing a record from its encoded
// size and indexed-term count, and calibrates itself online from the
// x-ms-request-charge of every successful write. It is safe for concurrent
// use.
//
// The fit is recursive least squares on [1, SizeCost(size), terms] with a
// forgetting factor, starting from the documented costs. Charges of about
// twice the prediction (an upsert that replaced an existing item) are
// learned as ReplaceRatio × a create rather than bending the create fit, and
// other outliers are clamped, so an occasional odd charge does not move the
// estimates much.
type CostModel struct {
	opts CostOptions

	mu  sync.Mutex
	cal Calibration
	// early holds the warm-up responses, to be learned again once a first
	// fit can tell the odd ones out.
	early []observation
	// charged and documented are the charges observed and what the
	// documented costs (the prior) give for creating the same items;
	// observed counts them, replaces those of them read as replacing an
	// existing item.
	charged, documented float64
	observed, replaces  int64
}

type observation struct {
	x      [3]float64
	charge float64
}

// NewCostModel returns an uncalibrated model with the documented costs.
func NewCostModel(opts CostOptions) *CostModel {
	if opts.Forgetting <= 0 || opts.Forgetting > 1 {
		opts.Forgetting = 0.999
	}
	return &CostModel{opts: opts, cal: priorCalibration()}
}

func features(size, terms int) [3]float64 {
	return [3]float64{1, SizeCost(size), float64(terms)}
}

func (c *Calibration) predict(x [3]float64) float64 {
	return c.Theta[0]*x[0] + c.Theta[1]*x[1] + c.Theta[2]*x[2]
}

// Estimate returns the expected charge of creating (or upserting a new)
// item: FixedCost when set, otherwise the model's prediction, inflated by
// SafetyMargin while the model is not yet calibrated.
func (m *CostModel) Estimate(size, terms int) float64 {
	if m.opts.FixedCost > 0 {
		return m.opts.FixedCost
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	est := m.cal.predict(features(size, terms))
	if !m.calibratedLocked() {
		est *= 1 + m.opts.SafetyMargin
	}
	return math.Max(est, minEstimate)
}

// Estimator returns Estimate as the model is now, for a caller that never
// calls Observe (a dry-run): the same figures, without the lock, which
// the mapping workers of a dry-run contended for on every record.
func (m *CostModel) Estimator() func(size, terms int) float64 {
	if m.opts.FixedCost > 0 {
		fixed := m.opts.FixedCost
		return func(int, int) float64 { return fixed }
	}
	m.mu.Lock()
	cal, calibrated := m.cal, m.calibratedLocked()
	m.mu.Unlock()
	margin := 1.0
	if !calibrated {
		margin += m.opts.SafetyMargin
	}
	return func(size, terms int) float64 {
		return math.Max(cal.predict(features(size, terms))*margin, minEstimate)
	}
}

// ReplaceRatio returns how much more an upsert of an existing item costs
// than a create, as observed (2 until observed).
func (m *CostModel) ReplaceRatio() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cal.ReplaceRatio
}

// ChargedAsReplaces reports whether the writes observed so far were
// charged, all told, what replacing existing items costs: replaceLow to
// replaceHigh × what the documented costs give for creating them, over
// at least warmup writes; ratio is that multiple. It tells a load that
// repeats an earlier one in upsert mode even when every write replaced
// an item: the fit then learns the replace's charge as a create's, and
// ReplacedShare stays near zero.
func (m *CostModel) ChargedAsReplaces() (ratio float64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.documented <= 0 || m.observed < warmup {
		return 0, false
	}
	ratio = m.charged / m.documented
	return ratio, ratio >= replaceLow && ratio <= replaceHigh
}

// ReplacedShare returns the share of the writes this model observed whose
// charge, against its fit, showed they replaced an existing item.
func (m *CostModel) ReplacedShare() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.observed == 0 {
		return 0
	}
	return float64(m.replaces) / float64(m.observed)
}

// Observe learns from the charge of one successful write of an item of the
// given size and term count. Non-positive or non-finite charges are ignored.
func (m *CostModel) Observe(size, terms int, charge float64) {
	if !(charge > 0) || math.IsInf(charge, 0) {
		return
	}
	x := features(size, terms)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.charged += charge
	documented := priorCalibration()
	m.documented += math.Max(documented.predict(x), minEstimate)
	m.observed++
	c := &m.cal
	if c.Observations < warmup {
		// Learn as it comes: the prior may be off by 2× for this container,
		// so nothing can be called an outlier yet.
		m.learn(x, charge)
		m.early = append(m.early, observation{x, charge})
		if c.Observations == warmup {
			m.relearnEarly()
		}
		return
	}
	m.learn(x, m.cleaned(x, charge))
}

// relearnEarly starts again from the prior and learns the warm-up responses
// again, now cleaned against the first fit, so a replace among the first
// few responses does not linger in the estimates.
func (m *CostModel) relearnEarly() {
	first := m.cal
	cleaned := make([]float64, len(m.early))
	for i, o := range m.early {
		cleaned[i] = m.cleaned(o.x, o.charge)
	}
	m.cal = priorCalibration()
	m.cal.ReplaceRatio = first.ReplaceRatio
	for i, o := range m.early {
		m.learn(o.x, cleaned[i])
	}
	m.early = nil
}

// cleaned returns the create-equivalent of a charge: a replace (≈ 2× the
// prediction) divided by the replace ratio, other outliers clamped
// Huber-style, never tighter than a few percent so real drift is followed.
func (m *CostModel) cleaned(x [3]float64, charge float64) float64 {
	c := &m.cal
	pred := math.Max(c.predict(x), minEstimate)
	ratio := charge / pred
	if ratio >= replaceLow && ratio <= replaceHigh {
		c.ReplaceRatio += 0.05 * (ratio - c.ReplaceRatio)
		m.replaces++
		return charge / c.ReplaceRatio
	}
	limit := math.Max(3*c.Residual, 0.05)
	return pred * (1 + math.Max(-limit, math.Min(limit, ratio-1)))
}

// learn feeds one (cleaned) response into the fit and the residual.
func (m *CostModel) learn(x [3]float64, y float64) {
	c := &m.cal
	pred := math.Max(c.predict(x), minEstimate)
	rel := math.Abs(y-pred) / pred
	if c.Observations == 0 {
		c.Residual = rel
	} else {
		c.Residual += 0.05 * (rel - c.Residual)
	}
	c.update(x, y, m.opts.Forgetting)
	c.Observations++
}

// update is one recursive-least-squares step with forgetting factor lambda.
func (c *Calibration) update(x [3]float64, y, lambda float64) {
	P := &c.Covariance
	var px [3]float64
	for i := range 3 {
		for j := range 3 {
			px[i] += P[i][j] * x[j]
		}
	}
	denom := lambda
	for i := range 3 {
		denom += x[i] * px[i]
	}
	e := y - c.predict(x)
	var k [3]float64
	for i := range 3 {
		k[i] = px[i] / denom
		c.Theta[i] += k[i] * e
	}
	trace := 0.0
	for i := range 3 {
		for j := range 3 {
			// P = (P - k (Px)ᵀ) / λ; P is symmetric so xᵀP = (Px)ᵀ.
			P[i][j] = (P[i][j] - k[i]*px[j]) / lambda
		}
		trace += P[i][i]
	}
	for i := range 3 {
		for j := i + 1; j < 3; j++ {
			s := (P[i][j] + P[j][i]) / 2
			P[i][j], P[j][i] = s, s
		}
	}
	if trace > maxTrace {
		for i := range 3 {
			for j := range 3 {
				P[i][j] *= maxTrace / trace
			}
		}
	}
}

// Calibrated reports whether the model has seen enough charges, predicted
// well enough, to drop the safety margin.
func (m *CostModel) Calibrated() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calibratedLocked()
}

func (m *CostModel) calibratedLocked() bool {
	return m.cal.Observations >= calibratedAfter && m.cal.Residual < residualCalibrated
}

// Snapshot returns the learned state for a checkpoint.
func (m *CostModel) Snapshot() Calibration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cal
}

// Restore replaces the learned state with one from Snapshot. A calibration
// of another version or with non-finite numbers is ignored, leaving the
// model as it was, and Restore reports false.
func (m *CostModel) Restore(c Calibration) bool {
	if c.Version != calibrationVersion || !finite(c) || c.ReplaceRatio <= 0 {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cal = c
	m.early = nil
	return true
}

func finite(c Calibration) bool {
	vals := []float64{c.Residual, c.ReplaceRatio}
	vals = append(vals, c.Theta[:]...)
	for _, row := range c.Covariance {
		vals = append(vals, row[:]...)
	}
	for _, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}
