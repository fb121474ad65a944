// An ordered map that also counts: how many keys come before a given one,
// and how long a prefix satisfies a condition, each in O(log n). The
// scheduler's lines use it so that a waiter's place is found without walking
// the line (daemon/waiting_line.h). A treap whose priorities are a hash of
// the insertion count, so that its shape, like everything in the scheduler,
// depends on the events alone.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace nvshare::daemon {

template <typename Key, typename Value>
class RankedMap {
public:
    size_t size() const { return root_ == kNil ? 0 : nodes_[root_].size; }
    bool empty() const { return root_ == kNil; }

    // False, changing nothing, if the key is there already.
    bool insert(const Key& key, const Value& value)
    {
        if (contains(key))
            return false;
        uint32_t n;
        if (!free_.empty()) {
            n = free_.back();
            free_.pop_back();
        } else {
            n = static_cast<uint32_t>(nodes_.size());
            nodes_.emplace_back();
        }
        nodes_[n] = Node{key, value, mix(++inserted_), kNil, kNil, 1};
        auto [less, rest] = split(root_, key);
        root_ = join(join(less, n), rest);
        return true;
    }

    bool erase(const Key& key)
    {
        uint32_t* link = &root_;
        while (*link != kNil) {
            Node& n = nodes_[*link];
            if (key < n.key) {
                link = &n.left;
            } else if (n.key < key) {
                link = &n.right;
            } else {
                const uint32_t gone = *link;
                *link = join(n.left, n.right);
                free_.push_back(gone);
                // The sizes on the way down lost one.
                for (uint32_t m = root_; m != kNil && m != *link;) {
                    Node& p = nodes_[m];
                    p.size--;
                    m = key < p.key ? p.left : p.right;
                }
                return true;
            }
        }
        return false;
    }

    bool contains(const Key& key) const
    {
        for (uint32_t m = root_; m != kNil;) {
            const Node& n = nodes_[m];
            if (key < n.key)
                m = n.left;
            else if (n.key < key)
                m = n.right;
            else
                return true;
        }
        return false;
    }

    // How many keys are less than `key`.
    size_t rank(const Key& key) const
    {
        return prefix_while([&](const Key& k, const Value&) { return k < key; });
    }

    // The length of the longest prefix whose entries satisfy `pred`, which
    // must hold for a prefix of the map and for nothing after it.
    template <typename Pred>
    size_t prefix_while(Pred pred) const
    {
        size_t count = 0;
        for (uint32_t m = root_; m != kNil;) {
            const Node& n = nodes_[m];
            if (pred(n.key, n.value)) {
                count += size_of(n.left) + 1;
                m = n.right;
            } else {
                m = n.left;
            }
        }
        return count;
    }

    // The entry at position `i` (< size()), in key order.
    std::pair<const Key&, const Value&> at(size_t i) const
    {
        uint32_t m = root_;
        for (;;) {
            const Node& n = nodes_[m];
            const size_t left = size_of(n.left);
            if (i < left) {
                m = n.left;
            } else if (i == left) {
                return {n.key, n.value};
            } else {
                i -= left + 1;
                m = n.right;
            }
        }
    }

    // Calls f(key, value) in key order while it returns true.
    template <typename F>
    void for_each(F&& f) const
    {
        std::vector<uint32_t> path;
        for (uint32_t m = root_;;) {
            for (; m != kNil; m = nodes_[m].left)
                path.push_back(m);
            if (path.empty())
                return;
            const Node& n = nodes_[path.back()];
            path.pop_back();
            if (!f(n.key, n.value))
                return;
            m = n.right;
        }
    }

private:
    static constexpr uint32_t kNil = UINT32_MAX;
    struct Node {
        Key key{};
        Value value{};
        uint64_t priority = 0;
        uint32_t left = kNil, right = kNil;
        uint32_t size = 0;
    };

    static uint64_t mix(uint64_t x)  // splitmix64's finalizer
    {
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
        return x ^ (x >> 31);
    }
    uint32_t size_of(uint32_t m) const { return m == kNil ? 0 : nodes_[m].size; }
    void update(uint32_t m)
    {
        nodes_[m].size = size_of(nodes_[m].left) + size_of(nodes_[m].right) + 1;
    }

    // (keys < key, keys >= key)
    std::pair<uint32_t, uint32_t> split(uint32_t m, const Key& key)
    {
        if (m == kNil)
            return {kNil, kNil};
        Node& n = nodes_[m];
        if (n.key < key) {
            auto [less, rest] = split(n.right, key);
            nodes_[m].right = less;
            update(m);
            return {m, rest};
        }
        auto [less, rest] = split(n.left, key);
        nodes_[m].left = rest;
        update(m);
        return {less, m};
    }

    // Every key of `a` is less than every key of `b`.
    uint32_t join(uint32_t a, uint32_t b)
    {
        if (a == kNil)
            return b;
        if (b == kNil)
            return a;
        if (nodes_[a].priority > nodes_[b].priority) {
            nodes_[a].right = join(nodes_[a].right, b);
            update(a);
            return a;
        }
        nodes_[b].left = join(a, nodes_[b].left);
        update(b);
        return b;
    }

    std::vector<Node> nodes_;
    std::vector<uint32_t> free_;
    uint32_t root_ = kNil;
    uint64_t inserted_ = 0;
};

}  // namespace nvshare::daemon
