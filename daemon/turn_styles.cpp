#include "daemon/turn_styles.h"

namespace nvshare::daemon {

Turns TurnStyles::style(Mode mode, bool oversubscribed)
{
    switch (mode) {
        case Mode::Off:
            return Turns::Free;
        case Mode::On:
            return Turns::Strict;
        case Mode::Auto:
            return oversubscribed ? Turns::Groups : Turns::Soft;
    }
    return Turns::Strict;
}

Turns TurnStyles::of(GpuIndex gpu) const
{
    if (gpu >= 64)
        return Turns::Free;  // not a GPU it can know
    for (size_t t = 0; t < kTurnStyles; ++t)
        if ((by_style_[t] & gpu_bit(gpu)) != 0)
            return static_cast<Turns>(t);
    return Turns::Free;
}

bool TurnStyles::serializing(GpuIndex gpu) const
{
    switch (of(gpu)) {
        case Turns::Strict:
        case Turns::Groups:
            return true;
        case Turns::Free:
        case Turns::Soft:
            return false;
    }
    return false;
}

GpuSet TurnStyles::with(std::initializer_list<Turns> styles) const
{
    GpuSet s = 0;
    for (Turns t : styles)
        s |= by_style_[static_cast<size_t>(t)];
    return s;
}

}  // namespace nvshare::daemon
