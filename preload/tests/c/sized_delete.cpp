/* sized_delete.cpp: C++ objects deleted with the sized deletes the compiler emits
 * (-fsized-deallocation): scalars, arrays with destructors, a derived object through a base
 * with a virtual destructor, in a region and outside, in every heap's sizes. With -DREPLACED the
 * program replaces operator new and operator delete(void *) with a pool of its own, whose
 * pointers lie 16 bytes inside malloc's blocks: the library's sized delete must hand them to
 * the replacement, unchecked. Prints "all ok". */
#include <dlfcn.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#ifdef REPLACED
static long replaced_news, replaced_deletes;
void *operator new(std::size_t n) {
    char *p = static_cast<char *>(std::malloc(n + 16));
    if (!p) throw std::bad_alloc();
    replaced_news++;
    return p + 16;
}
void operator delete(void *p) noexcept {
    if (!p) return;
    replaced_deletes++;
    std::free(static_cast<char *>(p) - 16);
}
void *operator new[](std::size_t n) { return operator new(n); }
void operator delete[](void *p) noexcept { operator delete(p); }
#endif

struct Base {
    virtual ~Base() {}
    long tag = 1;
};
template <int N> struct Derived : Base {
    char payload[N];
    Derived() { std::memset(payload, N & 0xff, N); }
};
struct Counted {
    static long live;
    char bytes[24];
    Counted() { live++; }
    ~Counted() { live--; }
};
long Counted::live = 0;

static void round_of_deletes() {
    for (int i = 0; i < 1000; i++) {
        Base *a = new Derived<8>, *b = new Derived<200>, *c = new Derived<3000>, *d = new Derived<100000>;
        delete c;
        delete a;
        delete d;
        delete b;
        Counted *arr = new Counted[i % 17 + 1];
        delete[] arr;
        long *l = new long(i);
        delete l;
    }
}

int main() {
    void (*begin)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "resize_region_begin");
    int (*end)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "resize_region_end");
    round_of_deletes();
    for (int r = 0; r < 20; r++) {
        if (begin) begin();
        round_of_deletes();
        if (end) end();
    }
    if (Counted::live != 0) { std::printf("destructors missing: %ld\n", Counted::live); return 1; }
#ifdef REPLACED
    if (replaced_news == 0 || replaced_news != replaced_deletes) {
        std::printf("replaced operators: %ld new, %ld deletes\n", replaced_news, replaced_deletes);
        return 1;
    }
#endif
    std::puts("all ok");
    return 0;
}
