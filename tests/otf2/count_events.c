/* Reference reader for the OTF2 load benchmark (tests/otf2/bench.sh builds it; it is never
 * part of commdb's build): reads an archive with the reference library, location by location,
 * with event callbacks that only count, and prints the count and the time taken. */
#include <otf2/otf2.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t* locations;
static size_t n_locations;

static OTF2_CallbackCode on_location(void* data, OTF2_LocationRef self, OTF2_StringRef name,
                                     OTF2_LocationType type, uint64_t events, OTF2_LocationGroupRef group) {
    (void)data; (void)name; (void)type; (void)events; (void)group;
    locations[n_locations++] = self;
    return OTF2_CALLBACK_SUCCESS;
}

#define COUNT(name, ...) static OTF2_CallbackCode name(OTF2_LocationRef l, OTF2_TimeStamp t, \
    uint64_t pos, void* data, OTF2_AttributeList* a, __VA_ARGS__) { (void)l; (void)t; (void)pos; (void)a; \
    ++*(uint64_t*)data; return OTF2_CALLBACK_SUCCESS; }
COUNT(on_enter, OTF2_RegionRef r)
COUNT(on_leave, OTF2_RegionRef r)
COUNT(on_send, uint32_t p, OTF2_CommRef c, uint32_t tag, uint64_t len)
COUNT(on_isend, uint32_t p, OTF2_CommRef c, uint32_t tag, uint64_t len, uint64_t req)
COUNT(on_isend_complete, uint64_t req)
COUNT(on_irecv_request, uint64_t req)
COUNT(on_recv, uint32_t p, OTF2_CommRef c, uint32_t tag, uint64_t len)
COUNT(on_irecv, uint32_t p, OTF2_CommRef c, uint32_t tag, uint64_t len, uint64_t req)
COUNT(on_coll_end, OTF2_CollectiveOp op, OTF2_CommRef c, uint32_t root, uint64_t s, uint64_t r)
static OTF2_CallbackCode on_coll_begin(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos, void* data,
                                       OTF2_AttributeList* a) {
    (void)l; (void)t; (void)pos; (void)a; ++*(uint64_t*)data; return OTF2_CALLBACK_SUCCESS;
}

int main(int argc, char** argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s ARCHIVE/traces.otf2\n", argv[0]); return 2; }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    OTF2_Reader* reader = OTF2_Reader_Open(argv[1]);
    if (!reader) { fprintf(stderr, "cannot open %s\n", argv[1]); return 1; }
    OTF2_Reader_SetSerialCollectiveCallbacks(reader);
    uint64_t n = 0;
    OTF2_Reader_GetNumberOfLocations(reader, &n);
    locations = calloc(n ? n : 1, sizeof *locations);
    OTF2_GlobalDefReader* gdr = OTF2_Reader_GetGlobalDefReader(reader);
    OTF2_GlobalDefReaderCallbacks* gcb = OTF2_GlobalDefReaderCallbacks_New();
    OTF2_GlobalDefReaderCallbacks_SetLocationCallback(gcb, on_location);
    OTF2_Reader_RegisterGlobalDefCallbacks(reader, gdr, gcb, NULL);
    uint64_t defs = 0;
    OTF2_Reader_ReadAllGlobalDefinitions(reader, gdr, &defs);
    for (size_t i = 0; i < n_locations; i++) OTF2_Reader_SelectLocation(reader, locations[i]);
    OTF2_Reader_OpenDefFiles(reader);
    OTF2_Reader_OpenEvtFiles(reader);
    for (size_t i = 0; i < n_locations; i++) {
        OTF2_DefReader* dr = OTF2_Reader_GetDefReader(reader, locations[i]);
        if (dr) { uint64_t d = 0; OTF2_Reader_ReadAllLocalDefinitions(reader, dr, &d); OTF2_Reader_CloseDefReader(reader, dr); }
    }
    OTF2_Reader_CloseDefFiles(reader);
    OTF2_EvtReaderCallbacks* cb = OTF2_EvtReaderCallbacks_New();
    OTF2_EvtReaderCallbacks_SetEnterCallback(cb, on_enter);
    OTF2_EvtReaderCallbacks_SetLeaveCallback(cb, on_leave);
    OTF2_EvtReaderCallbacks_SetMpiSendCallback(cb, on_send);
    OTF2_EvtReaderCallbacks_SetMpiIsendCallback(cb, on_isend);
    OTF2_EvtReaderCallbacks_SetMpiIsendCompleteCallback(cb, on_isend_complete);
    OTF2_EvtReaderCallbacks_SetMpiIrecvRequestCallback(cb, on_irecv_request);
    OTF2_EvtReaderCallbacks_SetMpiRecvCallback(cb, on_recv);
    OTF2_EvtReaderCallbacks_SetMpiIrecvCallback(cb, on_irecv);
    OTF2_EvtReaderCallbacks_SetMpiCollectiveBeginCallback(cb, on_coll_begin);
    OTF2_EvtReaderCallbacks_SetMpiCollectiveEndCallback(cb, on_coll_end);
    uint64_t counted = 0, read = 0;
    for (size_t i = 0; i < n_locations; i++) {
        OTF2_EvtReader* er = OTF2_Reader_GetEvtReader(reader, locations[i]);
        OTF2_Reader_RegisterEvtCallbacks(reader, er, cb, &counted);
        uint64_t r = 0;
        OTF2_Reader_ReadAllLocalEvents(reader, er, &r);
        read += r;
        OTF2_Reader_CloseEvtReader(reader, er);
    }
    OTF2_Reader_CloseEvtFiles(reader);
    OTF2_Reader_Close(reader);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("libotf2 reference reader: %" PRIu64 " events (%" PRIu64 " counted by callbacks) in %.3f s = %.2f M events/s\n",
           read, counted, s, (double)read / s / 1e6);
    return counted == read ? 0 : 1;
}
