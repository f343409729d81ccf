/*
 * service_loop.cpp: a request loop on libstdc++ containers, a few replies outliving their
 * request.
 *
 *   service_loop [REQUESTS=2000] [ENTRIES=300]
 *
 * One thread, one region per request (resize_region_begin/end, looked up with dlsym so the
 * same binary runs under every allocator; elsewhere they are no-ops). A request:
 *   1. builds an order document of ENTRIES lines as a std::string, from a deterministic
 *      generator ("id=..;customer=..;sku=..;qty=..;price=..\n");
 *   2. parses it (a tiny hand-written parser: std::string fields) into a
 *      std::map<std::string, double> of totals per customer and a
 *      std::unordered_map<std::string, int> of line counts per sku;
 *   3. sorts the totals as a std::vector<std::pair<std::string, double>> (largest first);
 *   4. formats a reply std::string (the top customers, the number of skus, the best sku).
 * Every 50th reply is moved into a std::deque holding the last 4 kept replies: it escapes its
 * region and is freed when a later request evicts it (the deque's own nodes come and go in
 * regions too). Everything else dies within its request.
 *
 * Output: "checksum <hex>" (identical under every allocator: a hash of every reply and of the
 * kept ones at the end), "time_s <seconds>" (the loop) and "maxrss_kib <ru_maxrss>".
 */
#include <dlfcn.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

void (*region_begin)();
int (*region_end)();

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t fnv(uint64_t h, const std::string &s) {
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
    return h;
}

// The document: one line per order entry; prices in cents, written as "12.34".
std::string make_document(uint64_t request, int entries) {
    std::string doc;
    uint64_t s = request * 1000003;
    for (int i = 0; i < entries; i++) {
        uint64_t r = mix(s++);
        unsigned cents = 99 + (unsigned)(r % 20000);
        doc += "id=";
        doc += std::to_string(request * 1000 + (uint64_t)i);
        doc += ";customer=customer-";
        doc += std::to_string((r >> 16) % 60);
        doc += ";sku=SKU-";
        doc += std::to_string((r >> 24) % 500);
        doc += ";qty=";
        doc += std::to_string(1 + (r >> 40) % 9);
        doc += ";price=";
        doc += std::to_string(cents / 100);
        doc += '.';
        doc += (char)('0' + cents / 10 % 10);
        doc += (char)('0' + cents % 10);
        doc += '\n';
    }
    return doc;
}

struct Parsed {
    std::map<std::string, double> totals;
    std::unordered_map<std::string, int> counts;
};

// key=value fields separated by ';', lines by '\n'.
Parsed parse(const std::string &doc) {
    Parsed p;
    size_t pos = 0;
    while (pos < doc.size()) {
        size_t eol = doc.find('\n', pos);
        if (eol == std::string::npos) eol = doc.size();
        std::string customer, sku;
        double qty = 0, price = 0;
        while (pos < eol) {
            size_t end = doc.find(';', pos);
            if (end == std::string::npos || end > eol) end = eol;
            size_t eq = doc.find('=', pos);
            std::string key = doc.substr(pos, eq - pos);
            std::string value = doc.substr(eq + 1, end - eq - 1);
            if (key == "customer") customer = std::move(value);
            else if (key == "sku") sku = std::move(value);
            else if (key == "qty") qty = std::strtod(value.c_str(), nullptr);
            else if (key == "price") price = std::strtod(value.c_str(), nullptr);
            pos = end + 1;
        }
        pos = eol + 1;
        p.totals[customer] += qty * price;
        p.counts[sku]++;
    }
    return p;
}

std::string handle(uint64_t request, int entries) {
    std::string doc = make_document(request, entries);
    Parsed p = parse(doc);
    std::vector<std::pair<std::string, double>> ranked(p.totals.begin(), p.totals.end());
    std::sort(ranked.begin(), ranked.end(), [](const auto &a, const auto &b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    std::string best_sku;
    int best = -1;
    for (const auto &kv : p.counts)
        if (kv.second > best || (kv.second == best && kv.first < best_sku)) best = kv.second, best_sku = kv.first;
    std::string reply = "{\"request\":" + std::to_string(request) + ",\"top\":[";
    for (size_t i = 0; i < ranked.size() && i < 10; i++) {
        char amount[32];
        std::snprintf(amount, sizeof amount, "%.2f", ranked[i].second);
        if (i) reply += ',';
        reply += "{\"customer\":\"" + ranked[i].first + "\",\"total\":" + amount + "}";
    }
    reply += "],\"skus\":" + std::to_string(p.counts.size()) + ",\"best_sku\":\"" + best_sku +
             "\",\"lines\":" + std::to_string(best) + "}";
    return reply;
}

}  // namespace

int main(int argc, char **argv) {
    long requests = argc > 1 ? std::atol(argv[1]) : 2000;
    int entries = argc > 2 ? std::atoi(argv[2]) : 300;
    if (requests < 1 || entries < 1) {
        std::fprintf(stderr, "usage: %s [REQUESTS] [ENTRIES]\n", argv[0]);
        return 1;
    }
    *(void **)&region_begin = dlsym(RTLD_DEFAULT, "resize_region_begin");
    *(void **)&region_end = dlsym(RTLD_DEFAULT, "resize_region_end");
    if (!region_begin || !region_end) region_begin = nullptr, region_end = nullptr;

    std::deque<std::string> kept;  // the last 4 kept replies
    uint64_t h = 0xcbf29ce484222325ULL;
    auto t0 = std::chrono::steady_clock::now();
    for (long r = 0; r < requests; r++) {
        if (region_begin) region_begin();
        {
            std::string reply = handle((uint64_t)r, entries);
            h = fnv(h, reply);
            if (r % 50 == 0) {
                kept.push_back(std::move(reply));  // escapes this region
                if (kept.size() > 4) kept.pop_front();  // one kept in an earlier region dies
            }
        }
        if (region_end && region_end() != 0) {
            std::fprintf(stderr, "resize_region_end failed\n");
            return 4;
        }
    }
    for (const auto &s : kept) h = fnv(h, s);
    kept.clear();
    auto t1 = std::chrono::steady_clock::now();
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    std::printf("checksum %016llx\n", (unsigned long long)h);
    std::printf("time_s %.6f\n", std::chrono::duration<double>(t1 - t0).count());
    std::printf("maxrss_kib %ld\n", ru.ru_maxrss);
    return 0;
}
