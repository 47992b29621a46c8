//! The memory store's expiry index: which key expires next.
//!
//! Records arrive in runs of nondecreasing expiry (every token expires 300 s after it is
//! issued, every receipt 600 s after), so the index keeps up to [`LANES`] queues, each in
//! nondecreasing order: an item joins the lane whose last item is the latest one not after it,
//! and the next item to expire is the soonest of the lanes' fronts. What fits no lane goes to a
//! binary heap. Pushing and popping cost a scan of the lanes' ends instead of a heap's
//! logarithmic sift.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::store::StoreKey;

/// How many in-order queues the index keeps.
pub(crate) const LANES: usize = 8;

/// An item: its expiry (Unix nanoseconds), its insertion number (unique, increasing) and its
/// key.
pub(crate) type Item = (i128, u64, StoreKey);

/// Items, soonest expiry first (ties: earliest inserted).
#[derive(Debug, Default)]
pub(crate) struct ExpiryIndex {
    lanes: Vec<VecDeque<Item>>,
    heap: BinaryHeap<Reverse<Item>>,
    len: usize,
    /// No item expires before this (`None`: no item), so that "nothing is due" takes no scan.
    due: Option<i128>,
}

impl ExpiryIndex {
    /// The number of items.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Adds an item. Its insertion number must be larger than every one pushed before.
    pub(crate) fn push(&mut self, item: Item) {
        self.len += 1;
        self.due = Some(self.due.map_or(item.0, |due| due.min(item.0)));
        // The lane whose last item expires latest but not after this one keeps its order with
        // this item at its end (insertion numbers only grow, so a tie in expiry is in order).
        let mut best: Option<(usize, i128)> = None;
        let mut empty = None;
        for (i, lane) in self.lanes.iter().enumerate() {
            match lane.back() {
                Some(&(last, _, _)) if last <= item.0 => {
                    if best.is_none_or(|(_, latest)| last > latest) {
                        best = Some((i, last));
                    }
                }
                Some(_) => {}
                None => empty = empty.or(Some(i)),
            }
        }
        let lane = match best.map(|(i, _)| i).or(empty) {
            Some(i) => self.lanes.get_mut(i),
            None if self.lanes.len() < LANES => {
                self.lanes.push(VecDeque::new());
                self.lanes.last_mut()
            }
            None => None,
        };
        match lane {
            Some(lane) => lane.push_back(item),
            None => self.heap.push(Reverse(item)),
        }
    }

    /// Where the soonest item is: a lane, or the heap (`None`).
    #[cfg(test)]
    fn soonest(&self) -> Option<(Option<usize>, (i128, u64))> {
        let mut soonest = self
            .heap
            .peek()
            .map(|Reverse((expires_at, inserted, _))| (None, (*expires_at, *inserted)));
        for (i, lane) in self.lanes.iter().enumerate() {
            if let Some(&(expires_at, inserted, _)) = lane.front()
                && soonest.is_none_or(|(_, at)| (expires_at, inserted) < at)
            {
                soonest = Some((Some(i), (expires_at, inserted)));
            }
        }
        soonest
    }

    /// The expiry of the soonest item.
    #[cfg(test)]
    pub(crate) fn next_expiry(&self) -> Option<i128> {
        self.soonest().map(|(_, (expires_at, _))| expires_at)
    }

    /// Removes every item that expires at or before `now`, handing each to `each` (lane by
    /// lane, then the heap: not in expiry order across lanes).
    pub(crate) fn drain_due(&mut self, now: i128, mut each: impl FnMut(Item)) {
        if self.due.is_none_or(|due| due > now) {
            return;
        }
        for lane in &mut self.lanes {
            while lane
                .front()
                .is_some_and(|(expires_at, _, _)| *expires_at <= now)
            {
                if let Some(item) = lane.pop_front() {
                    self.len -= 1;
                    each(item);
                }
            }
        }
        while self
            .heap
            .peek()
            .is_some_and(|Reverse((expires_at, _, _))| *expires_at <= now)
        {
            if let Some(Reverse(item)) = self.heap.pop() {
                self.len -= 1;
                each(item);
            }
        }
        // Whatever is left expires after `now`: a bound without a scan.
        self.due = (self.len > 0).then_some(now.saturating_add(1));
    }

    /// Removes and returns the soonest item.
    #[cfg(test)]
    pub(crate) fn pop(&mut self) -> Option<Item> {
        let item = match self.soonest()?.0 {
            Some(i) => self.lanes.get_mut(i)?.pop_front(),
            None => self.heap.pop().map(|Reverse(item)| item),
        };
        if item.is_some() {
            self.len -= 1;
        }
        // Still a bound: the next scan finds the true soonest.
        if self.len == 0 {
            self.due = None;
        }
        item
    }

    /// Keeps only the items for which `keep` is true, in their order.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&Item) -> bool) {
        for lane in &mut self.lanes {
            lane.retain(&mut keep);
        }
        self.heap.retain(|Reverse(item)| keep(item));
        self.len = self.lanes.iter().map(VecDeque::len).sum::<usize>() + self.heap.len();
        if self.len == 0 {
            self.due = None;
        }
    }

    /// Gives back memory held beyond what the items need (after a peak has drained).
    pub(crate) fn shrink(&mut self) {
        self.lanes.retain(|lane| !lane.is_empty());
        for lane in &mut self.lanes {
            lane.shrink_to_fit();
        }
        self.lanes.shrink_to_fit();
        self.heap.shrink_to_fit();
    }

    /// The memory the index holds room for, in items.
    pub(crate) fn capacity(&self) -> usize {
        self.lanes.iter().map(VecDeque::capacity).sum::<usize>() + self.heap.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::RecordKind;
    use proptest::prelude::*;

    fn key(i: u64) -> StoreKey {
        StoreKey::new(RecordKind::Token, format!("k{i}"))
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// Push an item expiring this long after the clock.
        Push(i128),
        Pop,
        /// Move the clock (pushes are relative to it, as a store's are).
        Advance(i128),
        /// Drop every item whose insertion number is divisible by this.
        Retain(u64),
        /// Drain what is due by the clock.
        Drain,
        Shrink,
    }

    fn arb_op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => prop_oneof![Just(300), Just(600), Just(120), Just(240), -5..700i128].prop_map(Op::Push),
            3 => Just(Op::Pop),
            2 => prop_oneof![Just(1), Just(0), Just(-3), 0..50i128].prop_map(Op::Advance),
            1 => (2..5u64).prop_map(Op::Retain),
            2 => Just(Op::Drain),
            1 => Just(Op::Shrink),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The index pops exactly what a binary heap of the same items pops, in the same order.
        #[test]
        fn pops_in_expiry_order_like_a_heap(ops in prop::collection::vec(arb_op(), 1..400)) {
            let mut index = ExpiryIndex::default();
            let mut model: BinaryHeap<Reverse<(i128, u64)>> = BinaryHeap::new();
            let (mut now, mut inserted) = (0i128, 0u64);
            for op in ops {
                match op {
                    Op::Push(after) => {
                        index.push((now + after, inserted, key(inserted)));
                        model.push(Reverse((now + after, inserted)));
                        inserted += 1;
                    }
                    Op::Pop => {
                        let want = model.pop().map(|Reverse(item)| item);
                        prop_assert_eq!(index.next_expiry(), want.map(|(at, _)| at));
                        let got = index.pop();
                        prop_assert_eq!(got.as_ref().map(|(at, n, _)| (*at, *n)), want);
                        if let Some((_, n, k)) = got {
                            prop_assert_eq!(k, key(n));
                        }
                    }
                    Op::Advance(by) => now += by,
                    Op::Retain(d) => {
                        index.retain(|(_, n, _)| n % d != 0);
                        model.retain(|Reverse((_, n))| n % d != 0);
                    }
                    Op::Shrink => index.shrink(),
                    Op::Drain => {
                        let mut drained = Vec::new();
                        index.drain_due(now, |(at, n, k)| drained.push((at, n, k)));
                        drained.sort_by_key(|(at, n, _)| (*at, *n));
                        let mut want = Vec::new();
                        while model.peek().is_some_and(|Reverse((at, _))| *at <= now) {
                            if let Some(Reverse(item)) = model.pop() {
                                want.push(item);
                            }
                        }
                        let got: Vec<(i128, u64)> = drained.iter().map(|(at, n, _)| (*at, *n)).collect();
                        prop_assert_eq!(got, want);
                        prop_assert!(drained.iter().all(|(_, n, k)| *k == key(*n)));
                    }
                }
                prop_assert_eq!(index.len(), model.len());
                prop_assert!(index.lanes.len() <= LANES);
            }
            while let Some(Reverse(want)) = model.pop() {
                let got = index.pop().map(|(at, n, _)| (at, n));
                prop_assert_eq!(got, Some(want));
            }
            prop_assert_eq!(index.pop().map(|(at, n, _)| (at, n)), None);
            prop_assert_eq!(index.len(), 0);
        }
    }

    /// The expiries in each lane, lane by lane.
    fn lanes(index: &ExpiryIndex) -> Vec<Vec<i128>> {
        let lane = |lane: &VecDeque<Item>| lane.iter().map(|(at, _, _)| *at).collect();
        index.lanes.iter().map(lane).collect()
    }

    #[test]
    fn an_item_joins_the_lane_whose_last_item_is_the_latest_not_after_it() {
        let mut index = ExpiryIndex::default();
        index.push((10, 0, key(0)));
        index.push((5, 1, key(1)));
        index.push((6, 2, key(2)));
        assert_eq!(lanes(&index), vec![vec![10], vec![5, 6]]);
        // The first lane empties (its record was replaced) and takes the next early item.
        index.retain(|(_, inserted, _)| *inserted != 0);
        index.push((3, 3, key(3)));
        assert_eq!(lanes(&index), vec![vec![3], vec![5, 6]]);
        // Both lanes end before 8; the second ends later, so 8 joins it, leaving the first
        // free for anything from 3 on.
        index.push((8, 4, key(4)));
        assert_eq!(lanes(&index), vec![vec![3], vec![5, 6, 8]]);
        index.push((4, 5, key(5)));
        assert_eq!(lanes(&index), vec![vec![3, 4], vec![5, 6, 8]]);
        assert!(index.heap.is_empty());
    }

    #[test]
    fn nothing_is_due_in_an_empty_index_and_the_bound_moves_past_a_drain() {
        let mut index = ExpiryIndex::default();
        assert_eq!(index.due, None);
        index.push((100, 0, key(0)));
        index.push((200, 1, key(1)));
        assert_eq!(index.due, Some(100));
        let mut drained = Vec::new();
        index.drain_due(100, |(at, _, _)| drained.push(at));
        assert_eq!(drained, vec![100], "an item is due at its expiry instant");
        assert_eq!(index.due, Some(101));
        index.drain_due(200, |(at, _, _)| drained.push(at));
        assert_eq!(drained, vec![100, 200]);
        // Empty again: no bound, so the next purge takes no scan.
        assert_eq!(index.due, None);
    }

    #[test]
    fn capacity_counts_the_room_in_lanes_and_heap() {
        let mut index = ExpiryIndex::default();
        // One item in each lane, then a hundred ever earlier ones that only the heap takes.
        for i in 0..LANES as u64 {
            index.push((-(i as i128), i, key(i)));
        }
        for i in 0..100u64 {
            index.push((-1000 - i as i128, 100 + i, key(i)));
        }
        assert_eq!(index.heap.len(), 100);
        let len = index.len();
        assert_eq!(len, LANES + 100);
        let capacity = index.capacity();
        assert!(capacity >= len, "room for {capacity} of {len} items");
        assert!(capacity < 4 * len, "room for {capacity} of {len} items");
    }

    #[test]
    fn runs_in_order_use_lanes_and_the_rest_the_heap() {
        let mut index = ExpiryIndex::default();
        // Two interleaved runs (tokens at +300, receipts at +600) fit two lanes.
        for now in 0..100 {
            index.push((now + 300, 2 * now as u64, key(0)));
            index.push((now + 600, 2 * now as u64 + 1, key(1)));
        }
        assert_eq!(index.lanes.len(), 2);
        assert!(index.heap.is_empty());
        // Ever earlier expiries each need a lane of their own, then the heap.
        for i in 0..20u64 {
            index.push((-(i as i128), 1000 + i, key(2)));
        }
        assert_eq!(index.lanes.len(), LANES);
        assert_eq!(index.heap.len(), 20 - (LANES - 2));
        assert_eq!(index.len(), 220);
        assert_eq!(index.next_expiry(), Some(-19));
        index.retain(|_| false);
        index.shrink();
        assert_eq!(
            (index.len(), index.capacity(), index.lanes.len()),
            (0, 0, 0)
        );
    }
}
