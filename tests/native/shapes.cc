// A C++ workload for sonda's tests: member functions, a template, a namespace and an
// overload, built with -finstrument-functions. Each function counts its calls and the
// program prints "calls <demangled name> <n>" lines: the names a trace must show. It
// also uses the C API from C++ (sonda.h is C and C++ compatible).
#include <cstdint>
#include <cstdio>

#include <sonda.h>

static uint64_t n_area, n_twice_int, n_twice_double, n_scale_int, n_scale_double, n_total;

namespace shapes {

struct Square {
    double side;
    __attribute__((noinline)) double area() const {
        n_area++;
        return side * side;
    }
};

template <typename T> __attribute__((noinline)) T twice(T x) {
    if (sizeof(T) == sizeof(int))
        n_twice_int++;
    else
        n_twice_double++;
    return x + x;
}

__attribute__((noinline)) int scale(int x) {
    n_scale_int++;
    return twice(x);
}

__attribute__((noinline)) double scale(double x) {
    n_scale_double++;
    return twice(x);
}

__attribute__((noinline)) double total(const Square *s, int n) {
    n_total++;
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += s[i].area() + scale(i) + scale(0.5 * i);
    return sum;
}

} // namespace shapes

int main() {
    sonda_thread_name("shapes-main");
    const uint32_t all = sonda_region("all rounds");
    shapes::Square squares[10];
    for (int i = 0; i < 10; i++)
        squares[i].side = i;
    double sum = 0;
    sonda_region_enter(all);
    for (int r = 0; r < 20; r++)
        sum += shapes::total(squares, 10);
    sonda_region_exit(all);
    std::printf("sum %.1f\n", sum);
    std::printf("calls shapes::Square::area() const %llu\n", (unsigned long long)n_area);
    std::printf("calls int shapes::twice<int>(int) %llu\n", (unsigned long long)n_twice_int);
    std::printf("calls double shapes::twice<double>(double) %llu\n",
                (unsigned long long)n_twice_double);
    std::printf("calls shapes::scale(int) %llu\n", (unsigned long long)n_scale_int);
    std::printf("calls shapes::scale(double) %llu\n", (unsigned long long)n_scale_double);
    std::printf("calls shapes::total(shapes::Square const*, int) %llu\n",
                (unsigned long long)n_total);
    return 0;
}
